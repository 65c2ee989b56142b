// The state of one `tessera chat` conversation and its slash commands, free of the engine and the
// terminal so they can be unit-tested: the system prompt, the turns so far, the sampling settings
// (/set), the statistics of the answers (/stats) and the JSON message files of /save and /load.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/chat_text.h"
#include "cli/sampling_flags.h"
#include "tessera/chat_message.h"
#include "tessera/sampling_params.h"

namespace tessera::cli {

// One answer's numbers, from its RequestOutput events and the client's clock.
struct TurnStats {
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // of prompt_tokens, served from the prefix cache
  int32_t answer_tokens = 0;
  double ttft_ms = 0.0;              // submit to the first token
  double decode_tok_per_s = 0.0;     // (answer_tokens - 1) over first to last token; 0 with < 2
  bool stopped = false;              // Ctrl-C ended it
};

struct ChatSession {
  std::string system;                // "" = none (the template's own default, if it has one)
  std::vector<ChatMessage> turns;    // user and assistant messages, alternating, oldest first
  // Sampling: the model's recommendation (ModelInfo::default_sampling) under the knobs the flags
  // and /set gave. params() is what an answer uses, but for max_tokens (see max_tokens).
  SamplingParams defaults;
  SamplingFlags sampling;
  int32_t max_tokens = 0;            // answer tokens at most; 0 = up to the end of the context
  ThinkMode think = ThinkMode::kShow;
  // Statistics: the last answer, and sums over every answer of the session.
  TurnStats last;
  int32_t num_answers = 0;
  int64_t total_prompt_tokens = 0, total_cached_prompt_tokens = 0;

  SamplingParams params() const { return sampling.resolve(defaults); }
  // What the template renders: the system message (when set) and the turns.
  std::vector<ChatMessage> messages() const;
  void record(const TurnStats& stats);
  std::string stats_text() const;     // the /stats report
  std::string settings_text() const;  // the /set report (no arguments)
};

// The outcome of a slash command: `report` is what was asked for (/help, /stats, /set without
// arguments: standard output), `note` a confirmation or an error (standard error).
struct CommandResult {
  bool quit = false;
  bool error = false;
  std::string report;
  std::string note;
};

// A line starting with '/' is a command.
bool is_command(std::string_view line);
CommandResult run_chat_command(ChatSession& session, std::string_view line);

// /save and /load: a JSON array of {"role", "content"} objects; a leading "system" message is the
// system prompt, then "user" and "assistant" messages. Error text on failure, "" on success.
std::string save_messages(const std::vector<ChatMessage>& messages, const std::string& path);
std::string load_messages(const std::string& path, std::string& system, std::vector<ChatMessage>& turns);

extern const char* const kChatHelp;

}  // namespace tessera::cli
