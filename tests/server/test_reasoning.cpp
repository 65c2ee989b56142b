// <think> splitting on a whole output and on every cut of a streamed one (tags split anywhere).
#include <gtest/gtest.h>

#include "server/reasoning.h"

namespace tessera::server {
namespace {

// A Qwen3-style output fixture.
const std::string kQwen3 = "<think>\nThe user asks 2+2. That is 4.\n</think>\n\nThe answer is 4.";

TEST(Reasoning, SplitsWholeOutput) {
  ReasoningSplit s = split_reasoning(kQwen3, false);
  EXPECT_EQ(s.reasoning, "\nThe user asks 2+2. That is 4.\n");
  EXPECT_EQ(s.content, "The answer is 4.");
  s = split_reasoning("plain answer, no <think> here", false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "plain answer, no <think> here");
  // DeepSeek-R1: the prompt opened the block; the output only closes it.
  s = split_reasoning("thinking...\n</think>\n\nanswer", true);
  EXPECT_EQ(s.reasoning, "thinking...\n");
  EXPECT_EQ(s.content, "answer");
  // Cut off before </think> (max_tokens): all reasoning.
  s = split_reasoning("<think>still thinking", false);
  EXPECT_EQ(s.reasoning, "still thinking");
  EXPECT_EQ(s.content, "");
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

// Every way of cutting the text into three deltas gives the same split as the whole text.
TEST(Reasoning, StreamingBoundariesCutTags) {
  for (const auto& [text, opens] : std::vector<std::pair<std::string, bool>>{
           {kQwen3, false}, {"r</think>c", true}, {"<thin", false}, {"<think></think>", false}, {"ab</thin", true}}) {
    const ReasoningSplit whole = split_reasoning(text, opens);
    for (size_t i = 0; i <= text.size(); ++i) {
      for (size_t j = i; j <= text.size(); ++j) {
        ReasoningSplitter splitter(opens);
        ReasoningSplit got;
        for (auto part : {text.substr(0, i), text.substr(i, j - i), text.substr(j)}) {
          ReasoningSplit d = splitter.push(part);
          EXPECT_EQ(d.reasoning.find("</think>"), std::string::npos);
          got.reasoning += d.reasoning;
          got.content += d.content;
        }
        ReasoningSplit tail = splitter.finish();
        got.reasoning += tail.reasoning;
        got.content += tail.content;
        EXPECT_EQ(got.reasoning, whole.reasoning) << text << " cut at " << i << "," << j;
        EXPECT_EQ(got.content, whole.content) << text << " cut at " << i << "," << j;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::server
