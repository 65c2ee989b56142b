// The serving load generator behind `tessera bench serve`: a seeded synthetic workload sent to any
// OpenAI-compatible server (tessera, llama.cpp's server, vLLM) at a request rate, measured per
// request from the SSE stream.
//
// Definitions (per request, all in ms):
//   TTFT = first non-empty text chunk - send time;  E2E = last byte - send time;
//   ITL  = gaps between consecutive text chunks;     TPOT = (E2E - TTFT) / (output_tokens - 1).
// Output tokens come from the server's usage (stream_options.include_usage), else the number of
// text chunks. Every request asks for exactly max_tokens: ignore_eos (vLLM, tessera) and
// min_tokens = max_tokens (for servers without ignore_eos, e.g. llama-cpp-python's). Goodput = requests meeting every SLO given with --goodput, per second.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::cli {

struct LoadConfig {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";   // or /v1/chat/completions
  std::string model;                          // "" = ask GET /v1/models
  std::string api_key;
  int32_t num_prompts = 100;
  double request_rate = 0.0;                  // requests/s; <= 0 or inf = all at once
  double burstiness = 1.0;                    // gamma shape; 1 = Poisson
  int32_t max_concurrency = 0;                // requests in flight at most; 0 = unlimited
  int32_t input_len = 128;                    // words per prompt (~tokens)
  double input_len_range = 0.0;               // +- fraction of input_len, uniform
  int32_t output_len = 64;                    // max_tokens (with ignore_eos)
  double output_len_range = 0.0;              // +- fraction of output_len, uniform (mixed lengths)
  int32_t prefix_len = 0;                     // shared prefix words per group
  int32_t num_prefix_groups = 1;              // prompts cycle through this many prefixes
  uint64_t seed = 0;
  std::map<std::string, double> slo_ms;       // "ttft" | "tpot" | "e2el" -> limit in ms
  int32_t timeout_s = 600;                    // per request
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body (--extra-body)
  // The multi-tenant workload (workload "multi-tenant"; chat endpoint): num_sessions conversations
  // of num_turns turns. Session s opens with system prompt s % num_system_prompts (system_prompt_len
  // words; tenants share them) and sends its turns one after another, each the conversation so far:
  // user turns of input_len words, earlier assistant turns as synthetic replies of output_len words
  // (the model's own replies would make the workload depend on the server). Every request of a
  // session carries the header `session_header: session-<s>` (SMG's consistent_hashing routes by
  // X-SMG-Routing-Key). Sessions start at the arrival times; max_concurrency caps sessions in flight;
  // num_prompts is num_sessions * num_turns.
  std::string workload = "random";            // "random" | "multi-tenant"
  int32_t num_sessions = 16;
  int32_t num_turns = 4;
  int32_t num_system_prompts = 8;
  int32_t system_prompt_len = 1000;           // words (about tokens)
  std::string session_header = "X-SMG-Routing-Key";
};

struct BenchPrompt {
  std::string text;
  int32_t num_words = 0;  // words in text (prefix + body)
  int32_t max_tokens = 0; // output tokens asked for (output_len, or drawn from its range)
  // Multi-tenant workload: the chat messages sent instead of text, and the session (turn order).
  nlohmann::json messages;  // null for the random workload
  int32_t session = -1;
  int32_t turn = 0;
};

// The workload: the same config and seed give the same prompts, byte for byte. Multi-tenant
// prompts come session by session, turns in order.
std::vector<BenchPrompt> make_dataset(const LoadConfig& config);

// The workload seed of rate number `rate_index` of a sweep: `seed` itself for the first, a distinct
// one for each later rate. A server with a prefix cache that already served a rate's prompts
// would otherwise answer the next rate's (the same text) from its cache, and every rate after the
// first would measure cache hits, not the workload (the sweeps of earlier stops did: their TTFT
// at 0.5 req/s was 71 ms against 655 at 0.25, the first rate).
uint64_t sweep_seed(uint64_t seed, size_t rate_index);

// Send times (seconds from the start), ascending; all zero for an infinite rate.
std::vector<double> arrival_offsets(int32_t num_requests, double rate, double burstiness, uint64_t seed);

struct RequestRecord {
  bool ok = false;
  std::string error;
  double ttft_ms = 0.0;
  double e2e_ms = 0.0;
  std::vector<double> itl_ms;       // [num_chunks - 1]
  int32_t prompt_tokens = 0;        // from usage (0 when the server sends none)
  int32_t output_tokens = 0;
};

// Linear-interpolated percentile (p in [0, 100]) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double p);
// (E2E - TTFT) / (output_tokens - 1); 0 for a single-token output.
double tpot_ms(const RequestRecord& r);

// The summary of one run: counts, throughputs, latency stats (mean, median, p90, p99) and goodput.
nlohmann::json summarize(const std::vector<RequestRecord>& records, double duration_s, const LoadConfig& config);

// Runs one load at config.request_rate against config.base_url; returns per-request records (in
// the prompts' order) and the wall time of the run (first send to last finish). What arrives at a
// time is one request, or one session (its turns in order); max_concurrency counts those.
std::vector<RequestRecord> run_load(const LoadConfig& config, const std::vector<BenchPrompt>& prompts,
                                    double* duration_s);

// GET /v1/models -> the first model id ("" on failure).
std::string discover_model(const LoadConfig& config);

}  // namespace tessera::cli
