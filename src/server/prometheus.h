// Prometheus text exposition (format 0.0.4) of the engine's MetricsSnapshot plus the server's own
// counters. Names are modeled on vLLM's (`vllm:num_requests_running` -> `tessera:num_requests_running`);
// every series carries a model_name label. Counters end in `_total`; histogram buckets are
// cumulative with a final le="+Inf" equal to _count.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/engine.h"
#include "tessera/metrics.h"

namespace tessera::server {

// Counters kept by the HTTP layer (cumulative since start-up unless noted).
struct ServerCounters {
  int64_t num_http_requests = 0;       // requests routed (any endpoint)
  int64_t num_http_errors_4xx = 0;     // error responses with 4xx status
  int64_t num_http_errors_5xx = 0;     // error responses with 5xx status
  int64_t num_client_disconnects = 0;  // requests whose client went away (request aborted)
  int32_t num_requests_in_flight = 0;  // gauge: generate requests submitted and not yet answered
};

std::string render_prometheus(const MetricsSnapshot& metrics, const ServerCounters& server,
                              const std::string& model_name);

// The series routers read under vLLM's names (vllm-router, production-stack, llm-d's scheduler and
// SMG's load monitor scrape these), from the same snapshot as the tessera: series:
//   vllm:num_requests_running, vllm:num_requests_waiting          gauges
//   vllm:kv_cache_usage_perc                                      gauge, 0..1 of blocks in use
//   vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total counters, in prompt tokens
//   vllm:cache_config_info{block_size,num_gpu_blocks,cache_dtype,enable_prefix_caching} 1
std::string render_vllm_compatible(const MetricsSnapshot& metrics, const ModelInfo& info,
                                   const std::string& model_name);

// LoRA adapters (nothing when none is loaded and none has requests):
//   vllm:lora_requests_info{running_lora_adapters, waiting_lora_adapters, max_lora} = the time (Unix
//     seconds), vLLM's gauge: the adapters with running / waiting requests, comma-separated
//   tessera:lora_requests_running / _waiting{lora_name}   gauges, per adapter with requests
//   tessera:lora_load_seconds{lora_name}                  gauge, per loaded adapter: its load time
std::string render_lora_metrics(const MetricsSnapshot& metrics, const std::vector<LoraAdapterInfo>& loaded,
                                const std::string& model_name, double now_unix_seconds);

// Escapes a label value (\\, \", \n) for the text format.
std::string escape_label_value(const std::string& value);

}  // namespace tessera::server
