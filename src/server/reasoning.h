// Reasoning output: a model that thinks in <think>...</think> (Qwen 3, QwQ, DeepSeek-R1 distills)
// gets the thinking returned as `reasoning_content` and the answer as `content`. Templates that
// open the think block in the generation prompt (DeepSeek-R1: "...<｜Assistant｜><think>\n") make the
// model start inside it, so the splitter starts in reasoning when the prompt ends with "<think>".
//
// The streaming splitter takes text deltas cut anywhere (inside a tag too) and returns the parts
// that are settled; a tail that may be the start of a tag is held until the next delta or finish().
// Concatenating every output equals split_reasoning() of the whole text.
#pragma once
#include <string>
#include <string_view>

namespace tessera::server {

struct ReasoningSplit {
  std::string reasoning;  // without the tags
  std::string content;    // the answer; leading whitespace after </think> dropped
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning);
  ReasoningSplit push(std::string_view delta);
  ReasoningSplit finish();  // flushes anything held back

 private:
  enum class State { kStart, kReasoning, kAfterThink, kContent };
  State state_;
  std::string pending_;
};

ReasoningSplit split_reasoning(std::string_view text, bool starts_in_reasoning);
// True when a rendered prompt leaves the model inside a think block.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace tessera::server
