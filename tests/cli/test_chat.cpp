// tessera chat's engine-free parts: multi-line input, the <think> display over streamed deltas cut
// at every offset (the answer part alone kept for the history), the slash commands and the JSON
// message files of /save and /load.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "cli/chat_session.h"
#include "cli/chat_text.h"

namespace tessera::cli {
namespace {

// Feeds lines; returns the messages completed.
std::vector<std::string> assemble(const std::vector<std::string>& lines) {
  InputAssembler in;
  std::vector<std::string> out;
  std::string message;
  for (const std::string& line : lines) {
    if (in.add_line(line, message)) out.push_back(message);
  }
  EXPECT_FALSE(in.pending());
  return out;
}

TEST(ChatInput, OneLineOneMessage) {
  EXPECT_EQ(assemble({"hello", "second\r"}), (std::vector<std::string>{"hello", "second"}));
}

TEST(ChatInput, BackslashContinues) {
  EXPECT_EQ(assemble({"one \\", "two\\", "three", "next"}),
            (std::vector<std::string>{"one \ntwo\nthree", "next"}));
}

TEST(ChatInput, TripleQuoteBlock) {
  EXPECT_EQ(assemble({R"(""")", "line 1", "", "line 3 \\", R"(""")", "after"}),
            (std::vector<std::string>{"line 1\n\nline 3 \\", "after"}));
  EXPECT_EQ(assemble({R"("""first)", R"(last""")"}), (std::vector<std::string>{"first\nlast"}));
  EXPECT_EQ(assemble({R"("""all in one""")"}), (std::vector<std::string>{"all in one"}));
  InputAssembler in;
  std::string message;
  EXPECT_FALSE(in.add_line(R"(""")", message));
  EXPECT_FALSE(in.add_line("/clear is text inside a block", message));
  EXPECT_TRUE(in.pending());
  in.reset();
  EXPECT_FALSE(in.pending());
  EXPECT_TRUE(in.add_line("fresh", message));
  EXPECT_EQ(message, "fresh");
}

struct Rendered {
  std::string shown;
  std::string answer;
};

// Streams `text` as three deltas cut at i and j.
Rendered render(const std::string& text, size_t i, size_t j, ThinkMode mode, bool color, bool opens) {
  ThinkRenderer r(mode, color, opens);
  Rendered out;
  for (const std::string& part : {text.substr(0, i), text.substr(i, j - i), text.substr(j)}) out.shown += r.push(part);
  out.shown += r.finish();
  out.answer = r.answer();
  return out;
}

struct Case {
  std::string text;
  bool opens;
  ThinkMode mode;
  bool color;
  std::string shown;
  std::string answer;
};

TEST(ChatThink, EveryCutShowsTheSame) {
  const std::string qwen3 = "<think>\nTwo and two.\n</think>\n\nIt is 4.";
  const std::vector<Case> cases = {
      {qwen3, false, ThinkMode::kShow, true, "\x1b[2m\nTwo and two.\n\x1b[0m\nIt is 4.", "It is 4."},
      {qwen3, false, ThinkMode::kShow, false, "<think>\nTwo and two.\n</think>\nIt is 4.", "It is 4."},
      {qwen3, false, ThinkMode::kHide, true, "It is 4.", "It is 4."},
      {"No tags <think> here", false, ThinkMode::kShow, true, "No tags <think> here", "No tags <think> here"},
      // DeepSeek-R1: the prompt opened the block.
      {"hmm</think>yes", true, ThinkMode::kShow, false, "<think>hmm\n</think>\nyes", "yes"},
      // Stopped (or cut off) while thinking: the span is closed, no answer to keep.
      {"<think>still going", false, ThinkMode::kShow, true, "\x1b[2mstill going\x1b[0m", ""},
      {"<think>still going", false, ThinkMode::kShow, false, "<think>still going\n</think>", ""},
      {"<think>still going", false, ThinkMode::kHide, false, "", ""},
  };
  for (const Case& c : cases) {
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); ++j) {
        const Rendered r = render(c.text, i, j, c.mode, c.color, c.opens);
        EXPECT_EQ(r.shown, c.shown) << c.text << " cut at " << i << "," << j;
        EXPECT_EQ(r.answer, c.answer) << c.text << " cut at " << i << "," << j;
      }
    }
  }
}

// /set puts a knob over the model's defaults (the flags' SamplingFlags, so the same names and ranges);
// a knob never set keeps the model's value.
TEST(ChatCommands, SetChangesTheKnobs) {
  ChatSession s;
  s.defaults.temperature = 0.8f;
  s.defaults.top_k = 40;
  s.defaults.top_p = 0.95f;
  s.defaults.min_p = 0.05f;
  EXPECT_FALSE(run_chat_command(s, "/set temperature 0.7").error);
  EXPECT_FLOAT_EQ(s.params().temperature, 0.7f);
  EXPECT_EQ(s.params().top_k, 40);
  EXPECT_FALSE(run_chat_command(s, "/set top_k 20").error);
  EXPECT_EQ(s.params().top_k, 20);
  EXPECT_FALSE(run_chat_command(s, "/set top-p 0.5").error);
  EXPECT_FLOAT_EQ(s.params().top_p, 0.5f);
  EXPECT_FLOAT_EQ(s.params().min_p, 0.05f);
  EXPECT_FALSE(run_chat_command(s, "/set min_p 0.1").error);
  EXPECT_FLOAT_EQ(s.params().min_p, 0.1f);
  EXPECT_FALSE(run_chat_command(s, "/set repetition_penalty 1.1").error);
  EXPECT_FLOAT_EQ(s.params().repetition_penalty, 1.1f);
  EXPECT_FALSE(run_chat_command(s, "/set max_tokens 64").error);
  EXPECT_EQ(s.max_tokens, 64);
  EXPECT_FALSE(run_chat_command(s, "/set seed 42").error);
  EXPECT_EQ(s.params().seed, 42u);
  EXPECT_EQ(run_chat_command(s, "/set").report,
            "temperature 0.70, top_k 20, top_p 0.50, min_p 0.10, repetition_penalty 1.10, seed 42, max_tokens 64, "
            "think show\n");
  EXPECT_FALSE(run_chat_command(s, "/set seed none").error);
  EXPECT_FALSE(s.params().seed.has_value());
  EXPECT_FALSE(run_chat_command(s, "/set think hide").error);
  EXPECT_EQ(s.think, ThinkMode::kHide);
  EXPECT_FALSE(run_chat_command(s, "/set max_tokens 0").error);
  EXPECT_EQ(run_chat_command(s, "/set").report,
            "temperature 0.70, top_k 20, top_p 0.50, min_p 0.10, repetition_penalty 1.10, max_tokens 0 (up to the end "
            "of the context), think hide\n");
  // Refused, and nothing changed.
  EXPECT_EQ(run_chat_command(s, "/set temperature -1").note, "/set temperature: temperature must be in [0, 100]");
  EXPECT_EQ(run_chat_command(s, "/set top_p 1.5").note, "/set top_p: top_p must be in [1e-09, 1]");
  EXPECT_EQ(run_chat_command(s, "/set top_k 2x").note, "/set top_k: '2x' is not a number");
  EXPECT_EQ(run_chat_command(s, "/set max_tokens -3").note,
            "/set max_tokens: '-3' is not a whole number >= 0 (0 = up to the end of the context)");
  EXPECT_EQ(run_chat_command(s, "/set think loud").note, "/set think: 'loud' is not show or hide");
  EXPECT_EQ(run_chat_command(s, "/set temperature").note, "/set temperature: give a value (/set NAME VALUE)");
  EXPECT_NE(run_chat_command(s, "/set warmth 3").note.find("unknown setting 'warmth'"), std::string::npos);
  EXPECT_FLOAT_EQ(s.params().temperature, 0.7f);
  EXPECT_EQ(s.params().top_k, 20);
  EXPECT_EQ(s.max_tokens, 0);
}

TEST(ChatCommands, ClearSystemQuitUnknown) {
  ChatSession s;
  s.system = "Be brief.";
  s.turns = {{"user", "hi"}, {"assistant", "hello"}};
  EXPECT_EQ(s.messages().size(), 3u);
  EXPECT_FALSE(run_chat_command(s, "/clear").error);
  EXPECT_TRUE(s.turns.empty());
  EXPECT_EQ(s.system, "Be brief.");
  EXPECT_FALSE(run_chat_command(s, "/system   You are a pirate.  ").error);
  EXPECT_EQ(s.system, "You are a pirate.");
  ASSERT_EQ(s.messages().size(), 1u);
  EXPECT_EQ(s.messages()[0].role, "system");
  run_chat_command(s, "/system");
  EXPECT_TRUE(s.messages().empty());
  EXPECT_TRUE(run_chat_command(s, "/bye").quit);
  EXPECT_TRUE(run_chat_command(s, "/exit").quit);
  EXPECT_FALSE(run_chat_command(s, "/help").report.empty());
  const CommandResult unknown = run_chat_command(s, "/frobnicate");
  EXPECT_TRUE(unknown.error);
  EXPECT_FALSE(unknown.quit);
  EXPECT_EQ(unknown.note, "unknown command '/frobnicate' (/help lists them)");
}

TEST(ChatCommands, StatsSumTheSession) {
  ChatSession s;
  EXPECT_EQ(run_chat_command(s, "/stats").report, "no answer yet\n");
  s.record({30, 0, 10, 12.5, 100.0, false});
  s.record({50, 32, 5, 4.0, 80.0, true});
  EXPECT_EQ(run_chat_command(s, "/stats").report,
            "last answer: 5 tokens, TTFT 4.0 ms, 80.0 tok/s (stopped)\n"
            "last prompt: 50 tokens, 32 served from the prefix cache\n"
            "session: 2 answers, 80 prompt tokens, 32 served from the prefix cache (hit rate 40.0%)\n");
}

TEST(ChatCommands, SaveThenLoadRoundTrips) {
  const std::string path = ::testing::TempDir() + "tessera_chat_roundtrip.json";
  ChatSession a;
  a.system = "Be \"brief\".";
  a.turns = {{"user", "hi\nthere"}, {"assistant", "héllo"}};
  EXPECT_FALSE(run_chat_command(a, "/save " + path).error);
  ChatSession b;
  b.turns = {{"user", "old"}};
  EXPECT_FALSE(run_chat_command(b, "/load " + path).error);
  EXPECT_EQ(b.system, a.system);
  ASSERT_EQ(b.turns.size(), 2u);
  EXPECT_EQ(b.turns[0].content, "hi\nthere");
  EXPECT_EQ(b.turns[1].role, "assistant");
  EXPECT_EQ(b.turns[1].content, "héllo");
  std::remove(path.c_str());
}

TEST(ChatCommands, LoadRefusesBadFiles) {
  const std::string path = ::testing::TempDir() + "tessera_chat_bad.json";
  auto load_text = [&](const std::string& text) {
    std::ofstream(path) << text;
    ChatSession s;
    s.turns = {{"user", "kept"}};
    const CommandResult r = run_chat_command(s, "/load " + path);
    EXPECT_TRUE(r.error);
    EXPECT_EQ(s.turns.size(), 1u);  // a failed load changes nothing
    return r.note;
  };
  EXPECT_EQ(load_text("[{"), "/load: '" + path + "' is not valid JSON");
  EXPECT_NE(load_text("{}").find("must hold a JSON array"), std::string::npos);
  EXPECT_NE(load_text(R"([{"role": "user"}])").find("message 0"), std::string::npos);
  EXPECT_NE(load_text(R"([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])")
                .find("message 1 of '" + path + "' has role 'system'"),
            std::string::npos);
  EXPECT_NE(load_text(R"([{"role": "tool", "content": "a"}])").find("has role 'tool'"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(run_chat_command(*std::make_unique<ChatSession>(), "/load /nonexistent/x.json").note.find("cannot read"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
