// The backend contract: what a gateway in front of several replicas (SMG, the SGLang model gateway;
// vllm-router; vLLM's production-stack router; llm-d's scheduler) reads from a worker, beside the
// OpenAI routes. Transport-free: each function turns the engine's public snapshot (MetricsSnapshot,
// ModelInfo) into the JSON body; the router in this module maps the routes onto them.
//
//   GET /v1/loads[?include=core,memory,queues,...]   SGLang's worker-load JSON (one rank, dp_rank 0)
//   GET /loads                                       the same document
//   GET /server_info, /get_server_info               limits and configuration, with the live load
//   GET /version                                     {"version": ...}
//   X-Request-ID                                     a safe client value names the request
//
// SMG 1.13 asks, at registration, /health, /v1/models, /version and /server_info, then every ~10 s
// /loads?model=<id>, /v1/loads?include=core,disagg,queues,memory and /metrics.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tessera/engine.h"
#include "tessera/metrics.h"

namespace tessera::server {

// The sections of /v1/loads beyond the core fields. `include` is the query value: comma-separated
// names; "all" turns every section on; names this worker has nothing for (disagg, spec, lora) and
// unknown names are ignored, so a newer gateway's list still gets the core document.
struct LoadsSections {
  bool memory = false;  // memory{weight_gb, kv_cache_gb, token_capacity}
  bool queues = false;  // queues{waiting, running}
};
LoadsSections parse_loads_include(std::string_view include);

// The value of parameter `name` in a query string ("a=1&include=core%2Cmemory"), percent-decoded;
// nullopt when absent.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

// Generated tokens per second between two reads of the cumulative counter (SGLang's
// gen_throughput: the rate over the last reporting interval); a read within 1 s of the last
// measured one returns the last rate. Thread-safe.
class ThroughputMeter {
 public:
  double update(int64_t generation_tokens, std::chrono::steady_clock::time_point now);

 private:
  std::mutex mu_;
  bool primed_ = false;
  int64_t last_tokens_ = 0;
  std::chrono::steady_clock::time_point last_time_{};
  double last_rate_ = 0.0;
};

// SGLang's /v1/loads document: {timestamp, version, dp_rank_count, loads: [one rank], aggregate}.
// Rank fields: num_running_reqs, num_waiting_reqs, num_waiting_uncached_tokens, num_used_tokens
// (KV tokens held by requests), num_total_tokens (used + waiting), max_total_num_tokens,
// max_running_requests, token_usage, gen_throughput, cache_hit_rate (prefix-cache hits / queries,
// in tokens, since start-up), utilization (running / max running).
nlohmann::json worker_loads(const MetricsSnapshot& m, const ModelInfo& info, const LoadsSections& sections,
                            double gen_throughput, const std::string& timestamp);

// /server_info: the model, the KV cache and scheduling limits in force, and the live load.
nlohmann::json server_info(const MetricsSnapshot& m, const ModelInfo& info, const std::string& served_model_name,
                           double uptime_seconds, int32_t requests_in_flight);

nlohmann::json version_info();

// "2026-12-02T13:38:26.123Z" (UTC, milliseconds).
std::string iso8601_utc(std::chrono::system_clock::time_point t);

// The X-Request-ID a client (or the gateway) sent, when it is safe to reuse as the request's id:
// 1..128 characters of [A-Za-z0-9._:/+=@-]. Anything else (empty, longer, spaces, quotes, control
// bytes) is nullopt and the server names the request itself.
std::optional<std::string> safe_request_id(std::string_view header_value);

// The contract's GET routes over one engine: keeps the start time and the throughput meter.
class ContractRoutes {
 public:
  static bool handles(std::string_view path);  // /v1/loads, /loads, /server_info, /get_server_info, /version
  // The JSON body for GET `path` with query string `query` (without '?'); `path` must be handled.
  nlohmann::json answer(const Engine& engine, const std::string& served_model_name, int32_t requests_in_flight,
                        std::string_view path, std::string_view query);

 private:
  ThroughputMeter meter_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace tessera::server
