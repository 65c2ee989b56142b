// tessera chat: an interactive conversation in the terminal. Each turn renders the whole history
// through the model's own chat template (Engine::chat_prompt) and submits it: the prefix cache
// serves the earlier turns' KV blocks, so a turn's TTFT tracks its new tokens, not the history's.
//
// Signals: until the model is loaded Ctrl-C ends the program as usual; then a SIGINT handler takes
// over that only sets an atomic flag and writes a byte to a self-pipe (both async-signal-safe, on
// whichever thread the kernel picks; SA_RESTART keeps the engine's system calls going). The answer
// loop checks the flag between RequestStream::next waits of kPoll; the line reader polls stdin and
// the pipe, so a Ctrl-C at the prompt ends the wait at once. Ctrl-C during an answer aborts the
// request and keeps what was shown of its answer part in the history (a turn stopped before any
// answer text is dropped whole, so user and assistant messages keep alternating); Ctrl-C at the
// prompt, Ctrl-D and /bye leave.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli/chat_session.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/progress.h"
#include "server/reasoning.h"
#include "util/timer.h"

namespace tessera::cli {
namespace {

constexpr std::chrono::milliseconds kPoll{50};

std::atomic<bool> g_interrupted{false};
int g_wake_pipe[2] = {-1, -1};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_wake_pipe[1], &byte, 1);  // full pipe: a wake is pending anyway
}

void drain_wake_pipe() {
  char buf[64];
  while (::read(g_wake_pipe[0], buf, sizeof buf) > 0) {
  }
}

// Forgets a Ctrl-C that is not meant for what comes next (one typed before an answer began).
void clear_interrupt() {
  drain_wake_pipe();
  g_interrupted.store(false);
}

// Lines from standard input, read with poll + read so that a Ctrl-C ends the wait.
class LineReader {
 public:
  enum class Status { kLine, kEof, kInterrupted };

  Status read(std::string& line) {
    while (true) {
      if (g_interrupted.exchange(false)) return Status::kInterrupted;
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return Status::kLine;
      }
      if (eof_) {
        if (buf_.empty()) return Status::kEof;
        line = std::move(buf_);  // a last line without its newline
        buf_.clear();
        return Status::kLine;
      }
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake_pipe[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        eof_ = true;
        continue;
      }
      if (fds[1].revents & POLLIN) {
        drain_wake_pipe();  // the flag is checked at the top (the handler sets it before writing)
        continue;
      }
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n > 0) buf_.append(chunk, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) eof_ = true;  // Ctrl-D at an empty line on a terminal: 0
    }
  }

 private:
  std::string buf_;
  bool eof_ = false;
};

struct Ui {
  bool interactive = false;  // stdin is a terminal: prompts, a banner
  bool color = false;        // stdout is a terminal and NO_COLOR is unset: ANSI faint for reasoning
  bool show_prompt = false;  // the rendered template on stderr before each answer
  bool verbose = false;      // and a stats line after it
};

void note(const Ui& ui, const std::string& text) {
  if (text.empty()) return;
  if (ui.color) std::fprintf(stderr, "\x1b[2m%s\x1b[0m\n", text.c_str());
  else std::fprintf(stderr, "%s\n", text.c_str());
}

void error(const std::string& text) { std::fprintf(stderr, "error: %s\n", text.c_str()); }

void out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// One turn: renders the conversation with `user` appended, streams the answer to stdout and keeps
// it in the history. False (the history unchanged) when the turn could not run.
bool answer_turn(Engine& e, ChatSession& s, const Ui& ui, const std::string& user) {
  const ModelInfo& info = e.model_info();
  s.turns.push_back({"user", user});
  auto drop_turn = [&](const std::string& why) {
    s.turns.pop_back();
    error(why);
    return false;
  };
  auto rendered = e.chat_prompt(chat_template_input(s.messages()), info.add_bos);
  if (!rendered) return drop_turn(rendered.error().message);
  if (ui.show_prompt) std::fprintf(stderr, "%s", rendered->text.c_str());
  const int32_t num_prompt = static_cast<int32_t>(rendered->ids.size());
  // The tokens one conversation can hold: the context, or less where the KV budget holds under one
  // full-context sequence (a big model with a small --kv-cache).
  const int32_t capacity = info.max_concurrency >= 1.0
                               ? info.context_length
                               : static_cast<int32_t>(info.max_concurrency * info.context_length);
  const int32_t room = capacity - num_prompt;
  if (room < 1) {
    return drop_turn("the conversation (" + std::to_string(num_prompt) + " tokens) fills the context of " +
                     std::to_string(capacity) + " tokens: /clear starts over");
  }
  SamplingParams params = s.params();
  params.n = 1;
  params.max_tokens = s.max_tokens > 0 ? std::min(s.max_tokens, room) : room;
  clear_interrupt();  // a Ctrl-C typed before the answer began is not meant for it
  const Clock::time_point start = Clock::now();
  auto submitted = e.submit({std::move(rendered->ids), params, ""});
  if (!submitted) return drop_turn(submitted.error().message);
  RequestStream& stream = **submitted;
  ThinkRenderer renderer(s.think, ui.color, server::prompt_opens_reasoning(rendered->text));
  TurnStats stats;
  double first_ms = -1.0, last_ms = 0.0;
  FinishReason reason = FinishReason::kNone;
  std::string failure;
  while (!stream.finished()) {
    if (g_interrupted.exchange(false) && !stats.stopped) {
      e.abort(stream.request_id());  // the final event (kAbort) follows
      stats.stopped = true;
    }
    std::optional<RequestOutput> ev = stream.next(kPoll);
    if (!ev) continue;
    const double t = ms_since(start);
    if (!ev->token_ids.empty()) {
      if (first_ms < 0) first_ms = t;
      last_ms = t;
    }
    if (!stats.stopped) out(renderer.push(ev->text_delta));  // after a Ctrl-C nothing more is shown
    stats.prompt_tokens = ev->num_prompt_tokens;
    stats.cached_prompt_tokens = ev->num_cached_prompt_tokens;
    stats.answer_tokens = ev->num_output_tokens;
    if (ev->finish_reason != FinishReason::kNone) {
      reason = ev->finish_reason;
      failure = ev->error;
    }
  }
  out(renderer.finish());
  out("\n");
  if (reason == FinishReason::kError) return drop_turn(failure);
  stats.ttft_ms = first_ms < 0 ? 0.0 : first_ms;
  const double decode_s = (last_ms - stats.ttft_ms) / 1000.0;
  stats.decode_tok_per_s = stats.answer_tokens > 1 && decode_s > 0 ? (stats.answer_tokens - 1) / decode_s : 0.0;
  s.record(stats);
  if (stats.stopped) note(ui, "[answer stopped]");
  if (ui.verbose) {
    std::fprintf(stderr, "[%d prompt tokens (%d from the prefix cache), TTFT %.1f ms | %d tokens, %.1f tok/s | %s]\n",
                 stats.prompt_tokens, stats.cached_prompt_tokens, stats.ttft_ms, stats.answer_tokens,
                 stats.decode_tok_per_s, finish_reason_name(reason));
  }
  if (stats.stopped && renderer.answer().empty()) {
    s.turns.pop_back();  // stopped before any answer: the turn is forgotten
    return true;
  }
  s.turns.push_back({"assistant", renderer.answer()});
  return true;
}

}  // namespace

int chat_main(int argc, char** argv) {
  CLI::App app{"tessera chat: an interactive conversation with the model (stdin not a terminal: one message "
               "per line, each answer on standard output)"};
  EngineConfig config;
  std::string kv_cache_text;
  add_engine_flags(app, config, kv_cache_text);
  ChatSession s;  // the flags go straight into it; the model's defaults come after the load
  bool hide_think = false;
  Ui ui;
  app.add_option("--system", s.system, "system prompt");
  app.add_option("-n,--max-tokens", s.max_tokens, "answer tokens at most (default 0: up to the end of the context)")
      ->check(CLI::NonNegativeNumber);
  add_sampling_flags(app, s.sampling);
  app.add_flag("--hide-think", hide_think, "hide the <think> reasoning of reasoning models (/set think hide)");
  app.add_flag("--show-prompt", ui.show_prompt, "print each rendered prompt (the chat template's text) on stderr");
  app.add_flag("-v,--verbose", ui.verbose, "start-up summary, rendered prompts and a stats line per answer (stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (const std::string err = finish_engine_flags(config, kv_cache_text); !err.empty()) {
    std::fprintf(stderr, "tessera chat: error: %s\n", err.c_str());
    return 1;
  }
  ui.show_prompt = ui.show_prompt || ui.verbose;
  ui.interactive = ::isatty(STDIN_FILENO);
  const char* no_color = std::getenv("NO_COLOR");
  ui.color = ::isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0');
  config.verbose = ui.verbose;
  // One conversation: 512 MiB holds a small model's whole context several times over (SmolLM2: 8192
  // tokens are 180 MiB) without the default's quarter of free memory, up to 4 GiB, to zero at start.
  if (config.kv_cache_bytes == 0 && app.count("--kv-cache-fraction") == 0) config.kv_cache_bytes = int64_t{512} << 20;
  config.on_load_progress = load_progress_reporter(config.model_path);

  auto engine = Engine::create(config);
  if (!engine) {
    std::fprintf(stderr, "tessera chat: error: %s\n", engine.error().message.c_str());
    return 1;
  }
  Engine& e = **engine;
  if (::pipe(g_wake_pipe) != 0) {
    std::fprintf(stderr, "tessera chat: error: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  ::fcntl(g_wake_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(g_wake_pipe[1], F_SETFL, O_NONBLOCK);
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);

  s.defaults = e.model_info().default_sampling;  // the model's recommendation; flags and /set override
  s.think = hide_think ? ThinkMode::kHide : ThinkMode::kShow;

  if (ui.verbose) std::fprintf(stderr, "sampling: %s\n", describe_sampling(s.params()).c_str());
  if (ui.interactive) {
    note(ui, "tessera chat: " + e.model_info().name + ", " + std::to_string(e.model_info().context_length) +
                 " tokens of context. /help for commands, Ctrl-D or /bye to leave.");
  }
  LineReader reader;
  InputAssembler input;
  bool failed = false;
  std::string line, message;
  while (true) {
    if (ui.interactive) out(input.pending() ? "... " : "> ");
    const LineReader::Status status = reader.read(line);
    if (status == LineReader::Status::kInterrupted && ui.interactive && input.pending()) {
      out("\n");
      input.reset();  // Ctrl-C inside a multi-line message drops it
      continue;
    }
    if (status != LineReader::Status::kLine) {
      if (ui.interactive) out("\n");
      break;
    }
    if (!input.add_line(line, message)) continue;
    if (message.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (is_command(message)) {
      const CommandResult r = run_chat_command(s, message);
      out(r.report);
      if (r.error) {
        error(r.note);
        failed = true;
      } else {
        note(ui, r.note);
      }
      if (r.quit) break;
      continue;
    }
    if (!answer_turn(e, s, ui, message)) failed = true;
  }
  e.shutdown(std::chrono::milliseconds(0));
  return !ui.interactive && failed ? 1 : 0;
}

}  // namespace tessera::cli
