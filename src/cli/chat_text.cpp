// Multi-line input and the <think> display of `tessera chat` (see chat_text.h).
#include "cli/chat_text.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kQuotes = R"(""")";
constexpr std::string_view kFaint = "\x1b[2m";
constexpr std::string_view kReset = "\x1b[0m";

}  // namespace

bool InputAssembler::add_line(std::string_view line, std::string& message) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF input
  switch (mode_) {
    case Mode::kIdle:
      if (line.starts_with(kQuotes)) {
        line.remove_prefix(kQuotes.size());
        // """text""" on one line is a whole block.
        if (line.size() >= kQuotes.size() && line.ends_with(kQuotes)) {
          message = std::string(line.substr(0, line.size() - kQuotes.size()));
          return true;
        }
        mode_ = Mode::kBlock;
        text_ = std::string(line);  // may be empty: the block starts on the next line
        if (!text_.empty()) text_ += '\n';
        return false;
      }
      if (line.ends_with('\\')) {
        mode_ = Mode::kBackslash;
        text_ = std::string(line.substr(0, line.size() - 1)) + '\n';
        return false;
      }
      message = std::string(line);
      return true;
    case Mode::kBackslash:
      if (line.ends_with('\\')) {
        text_ += line.substr(0, line.size() - 1);
        text_ += '\n';
        return false;
      }
      text_ += line;
      break;
    case Mode::kBlock:
      if (!line.ends_with(kQuotes)) {
        text_ += line;
        text_ += '\n';
        return false;
      }
      text_ += line.substr(0, line.size() - kQuotes.size());
      // `"""` alone on the closing line: the newline before it is not part of the message.
      if (!text_.empty() && text_.back() == '\n') text_.pop_back();
      break;
  }
  message = std::move(text_);
  reset();
  return true;
}

void InputAssembler::reset() {
  mode_ = Mode::kIdle;
  text_.clear();
}

ThinkRenderer::ThinkRenderer(ThinkMode mode, bool color, bool starts_in_reasoning)
    : splitter_(starts_in_reasoning), mode_(mode), color_(color) {}

std::string ThinkRenderer::push(std::string_view delta) { return render(splitter_.push(delta)); }

std::string ThinkRenderer::finish() {
  std::string out = render(splitter_.finish());
  if (in_reasoning_) {  // stopped (or cut off by max_tokens) while thinking
    if (color_) out += kReset;
    else out += last_reasoning_char_ == '\n' ? "</think>" : "\n</think>";
    in_reasoning_ = false;
  }
  return out;
}

std::string ThinkRenderer::render(const server::ReasoningSplit& split) {
  std::string out;
  // Within one split the reasoning always comes before the answer (one leading think block).
  if (!split.reasoning.empty() && mode_ == ThinkMode::kShow) {
    if (!in_reasoning_) {
      out += color_ ? kFaint : std::string_view("<think>");
      in_reasoning_ = true;
    }
    out += split.reasoning;
    last_reasoning_char_ = split.reasoning.back();
  }
  if (!split.content.empty()) {
    if (in_reasoning_) {
      if (color_) out += kReset;
      else out += last_reasoning_char_ == '\n' ? "</think>" : "\n</think>";
      in_reasoning_ = false;
      out += '\n';
    }
    out += split.content;
    answer_ += split.content;
  }
  return out;
}

}  // namespace tessera::cli
