// Chat templates: the C++ renderer against jinja2 goldens (tests/data/chat_templates/goldens.json,
// from scripts/gen_chat_template_goldens.py), byte for byte; family detection; fallback flag.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "tokenizer/chat_template.h"

namespace tessera::tokenizer {
namespace {

const std::string kDir = TESSERA_PROJECT_TESTDATA_DIR "/chat_templates/";

TEST(ChatTemplate, MatchesJinjaGoldens) {
  const auto golden = nlohmann::json::parse(testing::read_file(kDir + "goldens.json"));
  ASSERT_GE(golden["cases"].size(), 100u);
  int num_checked = 0, num_errors = 0;
  for (const auto& c : golden["cases"]) {
    const std::string source = testing::read_file(kDir + c["template"].get<std::string>());
    ASSERT_FALSE(source.empty()) << c["template"];
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    const Result<RenderedChat> r = render_chat(source, messages, c["add_generation_prompt"],
                                               c["bos_token"].get<std::string>(),
                                               c["eos_token"].get<std::string>());
    const std::string where = fmt::format("{} / {} / gen={}", c["template"].get<std::string>(),
                                          c["conversation"].get<std::string>(),
                                          c["add_generation_prompt"].get<bool>());
    if (c.contains("error")) {
      EXPECT_FALSE(r.ok()) << where << " should fail: " << c["error"];
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
      }
      ++num_errors;
    } else {
      ASSERT_TRUE(r.ok()) << where << ": " << r.error().message;
      EXPECT_EQ(r->text, c["expected"].get<std::string>()) << where;
      EXPECT_EQ(r->used_fallback, c["fallback"].get<bool>()) << where;
    }
    ++num_checked;
  }
  EXPECT_EQ(num_checked, static_cast<int>(golden["cases"].size()));
  EXPECT_GT(num_errors, 0);
}

TEST(ChatTemplate, DetectsFamilies) {
  struct Case {
    const char* file;
    ChatTemplateFamily family;
  };
  for (Case c : {Case{"chatml.jinja", ChatTemplateFamily::kChatMl},
                 Case{"smollm2.jinja", ChatTemplateFamily::kChatMl},
                 Case{"llama2.jinja", ChatTemplateFamily::kLlama2},
                 Case{"llama3.jinja", ChatTemplateFamily::kLlama3},
                 Case{"mistral_v1.jinja", ChatTemplateFamily::kMistralV1},
                 Case{"mistral_v3.jinja", ChatTemplateFamily::kMistralV3},
                 Case{"gemma.jinja", ChatTemplateFamily::kGemma},
                 Case{"phi3.jinja", ChatTemplateFamily::kPhi3}}) {
    const DetectedTemplate d = detect_chat_template(testing::read_file(kDir + c.file));
    EXPECT_EQ(d.family, c.family) << c.file;
    EXPECT_FALSE(d.used_fallback) << c.file;
  }
  EXPECT_TRUE(detect_chat_template(testing::read_file(kDir + "unknown_zephyr.jinja")).used_fallback);
  EXPECT_TRUE(detect_chat_template("").used_fallback);
  EXPECT_EQ(detect_chat_template(testing::read_file(kDir + "smollm2.jinja")).default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(detect_chat_template(testing::read_file(kDir + "chatml.jinja")).default_system_prompt,
            "");
}

TEST(ChatTemplate, SmolLm2DefaultSystemPrompt) {
  const std::string source = testing::read_file(kDir + "smollm2.jinja");
  Result<std::string> r = apply_chat_template(source, {{"user", "Hi"}}, true, "", "<|im_end|>");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace tessera::tokenizer
