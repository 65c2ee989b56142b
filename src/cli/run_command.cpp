// tessera run: one prompt (text, a chat message, or token ids), tokens streamed to the terminal as
// they come, a closing stats line; --json prints one object for scripts instead.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/progress.h"
#include "cli/sampling_flags.h"
#include "util/op_profile.h"
#include "util/status.h"
#include "util/timer.h"

namespace tessera::cli {


namespace {

constexpr const char* kDefaultChat = "Write a short story about a robot who learns to paint.";

Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return make_error(ErrorCode::kInvalidArgument, "--prompt-ids: '{}' is not a token id", item);
    }
  }
  if (ids.empty()) return make_error(ErrorCode::kInvalidArgument, "--prompt-ids is empty");
  return ids;
}

// The --profile table: per op, milliseconds per step and share of the step, for each phase that ran;
// "engine loop, own" is the engine step's time outside the runner (EngineImpl::step, timed there);
// "engine, scheduler, streaming" is the decode wall time the runner's steps do not account for
// (the engine loop, the client's streaming and the scheduling gaps between steps).
nlohmann::json profile_report(double decode_wall_ms, bool print) {
  const profile::Profile& p = profile::global();
  nlohmann::json out = nlohmann::json::object();
  const char* phase_names[2] = {"prefill", "decode"};
  for (int ph = 0; ph < 2; ++ph) {
    const int64_t steps = p.steps[ph];
    if (steps == 0) continue;
    const double step_ms = p.ms[ph][static_cast<int>(profile::Op::kStep)];
    nlohmann::json rows = nlohmann::json::array();
    if (print) {
      std::fprintf(stderr, "\n%s: %lld steps, %.3f ms per step in the runner\n", phase_names[ph],
                   static_cast<long long>(steps), step_ms / static_cast<double>(steps));
      std::fprintf(stderr, "  %-28s %10s %12s %8s\n", "op", "calls", "ms/step", "share");
    }
    std::vector<profile::OpRow> ops;
    const double rest = profile::phase_rows(static_cast<profile::Phase>(ph), ops);
    for (const profile::OpRow& r : ops) {
      rows.push_back({{"op", profile::op_name(r.op)}, {"calls", r.calls}, {"ms", r.ms},
                      {"ms_per_step", r.ms / static_cast<double>(steps)}});
      if (print) {
        std::fprintf(stderr, "  %-28s %10lld %12.4f %7.1f%%\n", profile::op_name(r.op), static_cast<long long>(r.calls),
                     r.ms / static_cast<double>(steps), step_ms > 0 ? 100.0 * r.ms / step_ms : 0.0);
      }
    }
    rows.push_back({{"op", "runner, other"}, {"ms", rest}, {"ms_per_step", rest / static_cast<double>(steps)}});
    if (print) {
      std::fprintf(stderr, "  %-28s %10s %12.4f %7.1f%%\n", "runner, other", "", rest / static_cast<double>(steps),
                   step_ms > 0 ? 100.0 * rest / step_ms : 0.0);
    }
    // The engine's own part of each step (profile::LoopScope), per its own steps: beside the runner's.
    const auto loop = static_cast<size_t>(profile::Op::kEngineLoop);
    if (p.calls[ph][loop] > 0) {
      const double loop_ms = p.ms[ph][loop] / static_cast<double>(p.calls[ph][loop]);
      rows.push_back({{"op", "engine loop (outside the runner)"}, {"ms_per_step", loop_ms}});
      if (print) {
        std::fprintf(stderr, "  %-28s %10s %12.4f   (beside the runner's step)\n", "engine loop, own", "", loop_ms);
      }
    }
    if (ph == 1 && steps > 1) {
      // The decode wall spans steps - 1 intervals (first token to last).
      const double per_step_wall = decode_wall_ms / static_cast<double>(steps - 1);
      const double engine = per_step_wall - step_ms / static_cast<double>(steps);
      rows.push_back({{"op", "engine, scheduler, streaming"}, {"ms_per_step", engine}});
      if (print) {
        std::fprintf(stderr, "  %-28s %10s %12.4f   (wall %.4f ms per decode step)\n", "engine, scheduler, streaming",
                     "", engine, per_step_wall);
      }
    }
    out[phase_names[ph]] = {{"steps", steps}, {"ms_per_step", step_ms / static_cast<double>(steps)}, {"ops", rows}};
  }
  return out;
}

}  // namespace

int run_main(int argc, char** argv) {
  CLI::App app{"tessera run: generate from one prompt, streaming tokens to the terminal"};
  EngineConfig config;
  std::string kv_cache_text;
  add_engine_flags(app, config, kv_cache_text);
  std::string prompt, chat, system, prompt_ids_text;
  // Sampling flags are kept apart from the params: a knob the user does not set takes the model's
  // recommended value (ModelInfo::default_sampling), known only once the file is loaded.
  SamplingFlags sampling;
  int32_t max_tokens = 128;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false, no_bos = false, special = false, quiet = false, verbose = false, show_prompt = false,
       profile_ops = false;
  app.add_option("-p,--prompt", prompt, "prompt text (tokenized as the model does; BOS when the model asks)");
  app.add_option("-c,--chat", chat, "a user message, rendered with the model's chat template (the default: a short "
                 "story prompt)");
  app.add_option("--system", system, "system message for --chat");
  app.add_option("--prompt-ids", prompt_ids_text, "prompt as comma-separated token ids");
  app.add_option("-n,--max-tokens", max_tokens, "tokens to generate at most");
  add_sampling_flags(app, sampling);
  app.add_option("--stop", stop, "stop string (repeatable)");
  std::string lora;
  app.add_option("--lora", lora, "a LoRA adapter GGUF (llama.cpp's format) to generate with");
  app.add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-sequence");
  app.add_flag("--no-bos", no_bos, "never add BOS to --prompt");
  app.add_flag("--special", special, "parse special tokens in --prompt");
  app.add_flag("--json", json, "print one JSON object (ids, text, timings) instead of streaming");
  app.add_flag("-q,--quiet", quiet, "only the generated text (no closing stats line)");
  app.add_flag("-v,--verbose", verbose, "the start-up summary, the sampling in force and the rendered chat prompt");
  app.add_flag("--show-prompt", show_prompt, "print the rendered chat prompt (stderr) before the answer");
  app.add_flag("--profile", profile_ops, "time each op of the forward, sampling and the engine; print a table "
               "(stderr, or a \"profile\" object with --json)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (const std::string err = finish_engine_flags(config, kv_cache_text); !err.empty()) {
    std::fprintf(stderr, "tessera run: error: %s\n", err.c_str());
    return 1;
  }
  // One prompt: a bigger chunk per step than serve's default (without chunked prefill the engine
  // derives the budget from max_model_len).
  if (config.enable_chunked_prefill && config.max_num_batched_tokens < 2048) config.max_num_batched_tokens = 2048;
  config.verbose = verbose && !json;
  if (!json && !quiet) config.on_load_progress = load_progress_reporter(config.model_path);
  if (config.kv_cache_bytes == 0) config.kv_cache_bytes = int64_t{256} << 20;  // one request
  if (!lora.empty()) config.lora_modules.push_back({"lora", lora});

  auto engine = Engine::create(config);
  if (!engine) {
    std::fprintf(stderr, "tessera run: error: %s\n", engine.error().message.c_str());
    return 1;
  }
  Engine& e = **engine;
  std::vector<int32_t> ids;
  if (!prompt_ids_text.empty()) {
    auto parsed = parse_ids(prompt_ids_text);
    if (!parsed) {
      std::fprintf(stderr, "tessera run: error: %s\n", parsed.error().message.c_str());
      return 1;
    }
    ids = std::move(*parsed);
  } else if (!prompt.empty()) {
    ids = e.tokenize(prompt, e.model_info().add_bos && !no_bos, special);
  } else {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", chat.empty() ? kDefaultChat : chat});
    auto rendered = e.chat_prompt(chat_template_input(messages), e.model_info().add_bos);
    if (!rendered) {
      std::fprintf(stderr, "tessera run: error: %s\n", rendered.error().message.c_str());
      return 1;
    }
    ids = std::move(rendered->ids);
    if (!json && (verbose || show_prompt)) std::fprintf(stderr, "%s", rendered->text.c_str());
  }
  SamplingParams params = sampling.resolve(e.model_info().default_sampling);
  params.max_tokens = max_tokens;
  params.stop = stop;
  params.ignore_eos = ignore_eos;
  if (verbose && !json) std::fprintf(stderr, "tessera run: sampling %s\n", describe_sampling(params).c_str());

  if (profile_ops) profile::global().enabled.store(true);
  const Clock::time_point start = Clock::now();
  auto stream = e.submit({ids, params, "", lora.empty() ? "" : "lora"});
  if (!stream) {
    std::fprintf(stderr, "tessera run: error: %s\n", stream.error().message.c_str());
    return 1;
  }
  std::vector<int32_t> out_ids;
  std::string text;
  double ttft_ms = 0.0, last_ms = 0.0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  while (auto ev = (*stream)->next()) {
    const double t = ms_since(start);
    if (out_ids.empty() && !ev->token_ids.empty()) ttft_ms = t;
    if (!ev->token_ids.empty()) last_ms = t;
    out_ids.insert(out_ids.end(), ev->token_ids.begin(), ev->token_ids.end());
    text += ev->text_delta;
    if (!json) {
      std::fwrite(ev->text_delta.data(), 1, ev->text_delta.size(), stdout);
      std::fflush(stdout);
    }
    if (ev->finish_reason != FinishReason::kNone) {
      reason = ev->finish_reason;
      error = ev->error;
    }
  }
  if (reason == FinishReason::kError) {
    std::fprintf(stderr, "\ntessera run: error: %s\n", error.c_str());
    return 1;
  }
  const double decode_s = (last_ms - ttft_ms) / 1000.0;
  const double decode_tps = out_ids.size() > 1 && decode_s > 0 ? (out_ids.size() - 1) / decode_s : 0.0;
  const double prompt_tps = ttft_ms > 0 ? ids.size() / (ttft_ms / 1000.0) : 0.0;
  const double gbps = decode_tps * static_cast<double>(e.model_info().weight_bytes) / 1e9;
  if (json) {
    nlohmann::json j;
    j["ids"] = out_ids;
    j["text"] = text;
    j["prompt_ids"] = ids;
    j["finish_reason"] = finish_reason_name(reason);
    j["timings"] = {{"ttft_ms", ttft_ms}, {"prompt_tokens", ids.size()}, {"prompt_tok_per_s", prompt_tps},
                    {"decode_tokens", out_ids.size()}, {"decode_tok_per_s", decode_tps},
                    {"decode_gb_per_s", gbps}, {"total_ms", last_ms}};
    if (profile_ops) j["profile"] = profile_report(last_ms - ttft_ms, false);
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (!quiet) {
    std::fprintf(stderr,
                 "\n[%zu prompt tokens, TTFT %.1f ms (%.0f tok/s) | %zu tokens, %.1f tok/s decode, %.2f GB/s "
                 "of weights | %s]\n",
                 ids.size(), ttft_ms, prompt_tps, out_ids.size(), decode_tps, gbps, finish_reason_name(reason));
  }
  if (!json && profile_ops) profile_report(last_ms - ttft_ms, true);
  e.shutdown(std::chrono::milliseconds(0));
  return 0;
}

}  // namespace tessera::cli
