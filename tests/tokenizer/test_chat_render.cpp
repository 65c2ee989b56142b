// ChatRenderer: the model's own template through the Jinja engine, with OpenAI-shaped messages
// normalised (arguments as a JSON string -> object, content parts -> text) to what HF templates
// expect; the family table only without a template.
#include <gtest/gtest.h>

#include <set>

#include "test_helpers.h"
#include "tokenizer/chat_render.h"

namespace tessera::tokenizer {
namespace {

using ojson = nlohmann::ordered_json;
const std::string kJinja = TESSERA_PROJECT_TESTDATA_DIR "/jinja/";

TEST(ChatRender, OpenAiShapedToolCallMatchesJinja2Golden) {
  const auto goldens = ojson::parse(testing::read_file(kJinja + "goldens.json"));
  const std::string source = testing::read_file(kJinja + "templates/gguf-qwen2.5-coder.jinja");
  ASSERT_FALSE(source.empty());
  for (const auto& c : goldens["cases"]) {
    if (c["template"] != "gguf-qwen2.5-coder" || c["conversation"] != "tool_call_and_result") continue;
    ChatRenderer renderer(source, c["context"]["bos_token"], c["context"]["eos_token"]);
    ASSERT_TRUE(renderer.uses_jinja());
    ChatRenderInput input;
    input.messages = c["context"]["messages"];
    // As an OpenAI client sends it: arguments as a JSON string.
    ojson& fn = input.messages[1]["tool_calls"][0]["function"];
    fn["arguments"] = fn["arguments"].dump();
    input.tools = c["context"]["tools"];
    auto out = renderer.render(input);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, c["output"].get<std::string>());
    return;
  }
  FAIL() << "golden case missing";
}

TEST(ChatRender, KwargsReachTheTemplate) {
  ChatRenderer renderer("{% if enable_thinking is defined and not enable_thinking %}off{% else %}on{% endif %}"
                        "|{{ messages[0].content }}", "", "");
  ChatRenderInput input;
  input.messages = ojson::array({{{"role", "user"}, {"content", ojson::array({{{"type", "text"}, {"text", "a"}},
                                                                               {{"type", "text"}, {"text", "b"}}})}}});
  EXPECT_EQ(*renderer.render(input), "on|a\nb");
  input.kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(*renderer.render(input), "off|a\nb");
  input.kwargs = {{"messages", 1}};
  EXPECT_FALSE(renderer.render(input).ok());
}

TEST(ChatRender, FallbackOnlyWithoutTemplateOrWhenUnparsable) {
  ChatRenderInput input;
  input.messages = ojson::array({{{"role", "user"}, {"content", "Hi"}}});
  ChatRenderer none("", "", "");
  EXPECT_FALSE(none.uses_jinja());
  EXPECT_EQ(*none.render(input), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ChatRenderer broken("{% for %}", "", "");
  EXPECT_FALSE(broken.uses_jinja());
  EXPECT_NE(broken.fallback_reason().find("line 1 column"), std::string::npos);
  ChatRenderer raising("{{ raise_exception('no system role') }}", "", "");
  auto r = raising.render(input);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no system role"), std::string::npos);
}

TEST(ChatRender, NoTemplateRendersInTheFamilyOfTheVocabularysTurnMarkers) {
  // Gemma-3-270M's GGUF carries no template; its vocabulary has <start_of_turn>/<end_of_turn>.
  const std::set<std::string> gemma_vocab = {"<bos>", "<start_of_turn>", "<end_of_turn>"};
  const std::string markers = vocab_turn_markers([&](const char* t) { return gemma_vocab.count(t) > 0; });
  EXPECT_EQ(markers, "<start_of_turn>");
  ChatRenderer gemma("", "<bos>", "<eos>", markers);
  ChatRenderInput input;
  input.messages = ojson::array({{{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(*gemma.render(input), "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  // A template, when present, wins over the markers.
  ChatRenderer templated("{{ messages[0].content }}", "", "", markers);
  EXPECT_EQ(*templated.render(input), "Hi");
  // No marker known: ChatML, as before.
  EXPECT_EQ(vocab_turn_markers([](const char*) { return false; }), "");
}

}  // namespace
}  // namespace tessera::tokenizer
