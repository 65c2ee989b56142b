// The text side of `tessera chat`, free of the engine so it can be unit-tested: how typed lines
// become one message (multi-line input) and how a streamed answer is shown (<think> dimmed, tagged
// or hidden) while only its answer part is kept for the history.
#pragma once
#include <string>
#include <string_view>

#include "server/reasoning.h"

namespace tessera::cli {

// Multi-line input. A line ending in a backslash continues on the next line (the backslash becomes
// a newline); a line starting with """ opens a block that the first line ending in """ closes
// (Ollama's convention; the quotes are dropped, the lines joined with newlines, text on the
// opening and closing lines kept).
class InputAssembler {
 public:
  // Takes one line (without its newline). True when a whole message is ready in `message`.
  bool add_line(std::string_view line, std::string& message);
  // True while a message is partly typed (the REPL shows a continuation prompt).
  bool pending() const { return mode_ != Mode::kIdle; }
  void reset();

 private:
  enum class Mode { kIdle, kBackslash, kBlock };
  Mode mode_ = Mode::kIdle;
  std::string text_;
};

enum class ThinkMode { kShow, kHide };

// Renders an answer's text deltas for the terminal. The reasoning (<think>...</think>, split by
// server/reasoning.h's ReasoningSplitter, so a tag cut across deltas is recognised) is shown
// faint (ANSI SGR 2) when `color`, between literal <think> and </think> lines without colour, or not
// at all with ThinkMode::kHide; the answer is printed as it comes, after a line break that sets it
// apart from shown reasoning. answer() is the answer part alone: what goes into the history.
class ThinkRenderer {
 public:
  ThinkRenderer(ThinkMode mode, bool color, bool starts_in_reasoning);
  // The terminal text for one delta (possibly empty: a tail that may start a tag is held back).
  std::string push(std::string_view delta);
  // The rest at the end of the answer (or when it is stopped); closes an open faint span.
  std::string finish();
  const std::string& answer() const { return answer_; }

 private:
  std::string render(const server::ReasoningSplit& split);

  server::ReasoningSplitter splitter_;
  ThinkMode mode_;
  bool color_;
  bool in_reasoning_ = false;   // a reasoning span is open on the terminal
  char last_reasoning_char_ = '\n';
  std::string answer_;
};

}  // namespace tessera::cli
