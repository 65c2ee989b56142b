// `tessera chat`'s conversation state and slash commands (see chat_session.h).
#include "cli/chat_session.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tessera::cli {

const char* const kChatHelp =
    "Type a message and press Enter; the answer streams back. Ctrl-C stops an answer, Ctrl-C at the\n"
    "prompt or Ctrl-D exits. A line ending in \\ continues on the next line; a block between two \"\"\"\n"
    "lines is one message.\n"
    "  /help                    this text\n"
    "  /clear                   forget the conversation (the system prompt stays)\n"
    "  /system TEXT             set the system prompt (/system alone removes it)\n"
    "  /set NAME VALUE          temperature, top_k, top_p, min_p, repetition_penalty,\n"
    "                           presence_penalty, frequency_penalty, seed (none = the engine's),\n"
    "                           max_tokens (0 = up to the end of the context), think (show | hide);\n"
    "                           /set alone lists them\n"
    "  /save FILE, /load FILE   the conversation as a JSON array of {\"role\", \"content\"} messages\n"
    "  /stats                   tokens, TTFT and tokens/s of the last answer, prefix-cache hits\n"
    "  /bye, /exit              leave\n";

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool parse_int(std::string_view text, T& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

CommandResult fail(std::string note) { return {false, true, "", std::move(note)}; }
CommandResult ok(std::string note) { return {false, false, "", std::move(note)}; }

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// /set NAME VALUE: the sampling knobs through SamplingFlags::set (the same names and ranges as the
// flags, checked here rather than at the next turn), then the chat's own: max_tokens and think.
CommandResult set_knob(ChatSession& s, std::string name, std::string_view value) {
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  const std::string bad = "/set " + name + ": '" + std::string(value) + "' is not ";
  if (name == "max_tokens") {
    int32_t n = 0;
    if (!parse_int(value, n) || n < 0) return fail(bad + "a whole number >= 0 (0 = up to the end of the context)");
    s.max_tokens = n;
  } else if (name == "think") {
    if (value == "show") s.think = ThinkMode::kShow;
    else if (value == "hide") s.think = ThinkMode::kHide;
    else return fail(bad + "show or hide");
  } else if (name == "seed" && value == "none") {
    s.sampling.seed.reset();  // the engine's seed for each request
  } else if (std::string err = s.sampling.set(name, std::string(value)); !err.empty()) {
    return fail("/set " + name + ": " + err + (err.starts_with("unknown setting") ? ", or max_tokens, think" : ""));
  }
  return ok("set " + name + " to " + std::string(value));
}

}  // namespace

std::vector<ChatMessage> ChatSession::messages() const {
  std::vector<ChatMessage> out;
  out.reserve(turns.size() + 1);
  if (!system.empty()) out.push_back({"system", system});
  out.insert(out.end(), turns.begin(), turns.end());
  return out;
}

void ChatSession::record(const TurnStats& stats) {
  last = stats;
  num_answers += 1;
  total_prompt_tokens += stats.prompt_tokens;
  total_cached_prompt_tokens += stats.cached_prompt_tokens;
}

std::string ChatSession::stats_text() const {
  if (num_answers == 0) return "no answer yet\n";
  const double rate = total_prompt_tokens > 0 ? 100.0 * static_cast<double>(total_cached_prompt_tokens) /
                                                    static_cast<double>(total_prompt_tokens) : 0.0;
  return format("last answer: %d tokens, TTFT %.1f ms, %.1f tok/s%s\n", last.answer_tokens, last.ttft_ms,
                last.decode_tok_per_s, last.stopped ? " (stopped)" : "") +
         format("last prompt: %d tokens, %d served from the prefix cache\n", last.prompt_tokens,
                last.cached_prompt_tokens) +
         format("session: %d answer%s, %lld prompt tokens, %lld served from the prefix cache (hit rate %.1f%%)\n",
                num_answers, num_answers == 1 ? "" : "s", static_cast<long long>(total_prompt_tokens),
                static_cast<long long>(total_cached_prompt_tokens), rate);
}

std::string ChatSession::settings_text() const {
  return describe_sampling(params()) + ", max_tokens " + std::to_string(max_tokens) +
         (max_tokens == 0 ? " (up to the end of the context)" : "") +
         (think == ThinkMode::kShow ? ", think show\n" : ", think hide\n");
}

bool is_command(std::string_view line) { return line.starts_with('/'); }

CommandResult run_chat_command(ChatSession& s, std::string_view line) {
  line = trim(line);
  const size_t space = line.find_first_of(" \t");
  const std::string_view name = line.substr(0, space);
  const std::string_view rest = space == std::string_view::npos ? std::string_view() : trim(line.substr(space));
  if (name == "/bye" || name == "/exit") return {true, false, "", ""};
  if (name == "/help" || name == "/?") return {false, false, kChatHelp, ""};
  if (name == "/clear") {
    s.turns.clear();
    return ok("conversation cleared");
  }
  if (name == "/system") {
    s.system = std::string(rest);
    return ok(rest.empty() ? "system prompt removed" : "system prompt set");
  }
  if (name == "/stats") return {false, false, s.stats_text(), ""};
  if (name == "/set") {
    if (rest.empty()) return {false, false, s.settings_text(), ""};
    const size_t sp = rest.find_first_of(" \t");
    if (sp == std::string_view::npos) return fail("/set " + std::string(rest) + ": give a value (/set NAME VALUE)");
    return set_knob(s, std::string(rest.substr(0, sp)), trim(rest.substr(sp)));
  }
  if (name == "/save" || name == "/load") {
    if (rest.empty()) return fail(std::string(name) + ": give a file name");
    const std::string path(rest);
    if (name == "/save") {
      const std::string err = save_messages(s.messages(), path);
      return err.empty() ? ok(format("saved %zu messages to %s", s.messages().size(), path.c_str())) : fail(err);
    }
    std::string system;
    std::vector<ChatMessage> turns;
    if (std::string err = load_messages(path, system, turns); !err.empty()) return fail(err);
    s.system = std::move(system);
    s.turns = std::move(turns);
    return ok(format("loaded %zu messages from %s", s.messages().size(), path.c_str()));
  }
  return fail("unknown command '" + std::string(name) + "' (/help lists them)");
}

std::string save_messages(const std::vector<ChatMessage>& messages, const std::string& path) {
  nlohmann::json j = nlohmann::json::array();
  for (const ChatMessage& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return "/save: cannot write '" + path + "'";
  f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  f.close();
  if (!f) return "/save: writing '" + path + "' failed";
  return "";
}

std::string load_messages(const std::string& path, std::string& system, std::vector<ChatMessage>& turns) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "/load: cannot read '" + path + "'";
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "/load: '" + path + "' is not valid JSON";
  if (!j.is_array()) return "/load: '" + path + "' must hold a JSON array of {\"role\", \"content\"} messages";
  system.clear();
  turns.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& m = j[i];
    const std::string at = "/load: message " + std::to_string(i) + " of '" + path + "'";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return at + " is not an object with string \"role\" and \"content\"";
    }
    const std::string role = m["role"].get<std::string>();
    const std::string content = m["content"].get<std::string>();
    if (role == "system" && i == 0) {
      system = content;
    } else if (role == "user" || role == "assistant") {
      turns.push_back({role, content});
    } else {
      return at + " has role '" + role + "' (a first \"system\", then \"user\" and \"assistant\")";
    }
  }
  return "";
}

}  // namespace tessera::cli
