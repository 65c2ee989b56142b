// <think> splitting (see reasoning.h).
#include "server/reasoning.h"

namespace tessera::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

ReasoningSplit ReasoningSplitter::push(std::string_view delta) {
  pending_ += delta;
  ReasoningSplit out;
  while (true) {
    switch (state_) {
      case State::kStart: {
        size_t ws = 0;
        while (ws < pending_.size() && is_ws(pending_[ws])) ++ws;
        const std::string_view rest = std::string_view(pending_).substr(ws);
        if (rest.starts_with(kOpen)) {
          pending_.erase(0, ws + kOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (kOpen.starts_with(rest)) return out;  // may still be "<think>" (or only whitespace)
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t at = pending_.find(kClose);
        if (at != std::string::npos) {
          out.reasoning += pending_.substr(0, at);
          pending_.erase(0, at + kClose.size());
          state_ = State::kAfterThink;
          continue;
        }
        const size_t hold = partial_tag_suffix(pending_, kClose);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return out;
      }
      case State::kAfterThink: {
        size_t ws = 0;
        while (ws < pending_.size() && is_ws(pending_[ws])) ++ws;
        pending_.erase(0, ws);
        if (pending_.empty()) return out;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content += pending_;
        pending_.clear();
        return out;
    }
  }
}

ReasoningSplit ReasoningSplitter::finish() {
  ReasoningSplit out;
  if (state_ == State::kReasoning) {
    out.reasoning = std::move(pending_);  // unterminated thinking (e.g. max_tokens reached)
  } else if (state_ != State::kAfterThink) {
    out.content = std::move(pending_);
  }
  pending_.clear();
  return out;
}

ReasoningSplit split_reasoning(std::string_view text, bool starts_in_reasoning) {
  ReasoningSplitter splitter(starts_in_reasoning);
  ReasoningSplit out = splitter.push(text);
  ReasoningSplit tail = splitter.finish();
  out.reasoning += tail.reasoning;
  out.content += tail.content;
  return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  while (!prompt.empty() && is_ws(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

}  // namespace tessera::server
