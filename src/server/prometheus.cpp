#include "server/prometheus.h"

#include <fmt/format.h>

namespace tessera::server {
namespace {

class Writer {
 public:
  explicit Writer(const std::string& model_name)
      : labels_(fmt::format("model_name=\"{}\"", escape_label_value(model_name))) {}

  void header(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  template <typename T>
  void gauge(const char* name, const char* help, T value) {
    header(name, "gauge", help);
    sample(name, "", value);
  }
  template <typename T>
  void counter(const char* name, const char* help, T value) {
    const std::string full = std::string(name) + "_total";
    header(full.c_str(), "counter", help);
    sample(full, "", value);
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    header(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += i < h.counts.size() ? h.counts[i] : 0;
      sample(std::string(name) + "_bucket", fmt::format(",le=\"{}\"", h.bounds[i]), cumulative);
    }
    sample(std::string(name) + "_bucket", ",le=\"+Inf\"", h.count);
    sample(std::string(name) + "_sum", "", h.sum);
    sample(std::string(name) + "_count", "", h.count);
  }
  template <typename T>
  void sample(const std::string& name, const std::string& extra_labels, T value) {
    out_ += fmt::format("{}{{{}{}}} {}\n", name, labels_, extra_labels, value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string labels_;
  std::string out_;
};

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string render_prometheus(const MetricsSnapshot& m, const ServerCounters& s,
                              const std::string& model_name) {
  Writer w(model_name);
  w.gauge("tessera:num_requests_running", "Requests in the running batch.", m.num_requests_running);
  w.gauge("tessera:num_requests_waiting", "Requests waiting to be scheduled.", m.num_requests_waiting);
  w.gauge("tessera:kv_cache_usage_perc", "KV-cache usage: fraction of blocks in use (0..1).",
          m.kv_cache_usage);
  w.gauge("tessera:kv_cache_blocks_total", "KV-cache blocks in the pool.", m.num_kv_blocks_total);
  w.gauge("tessera:kv_cache_blocks_free", "KV-cache blocks held by no request and caching nothing.",
          m.num_kv_blocks_free);
  w.gauge("tessera:kv_cache_blocks_cached", "KV-cache blocks held by no request but caching a prefix (evictable).",
          m.num_kv_blocks_cached);
  w.counter("tessera:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
            m.prefix_cache_queries);
  w.counter("tessera:prefix_cache_hits", "Prompt tokens served from the prefix cache.",
            m.prefix_cache_hits);
  w.counter("tessera:num_preemptions", "Requests preempted (blocks reclaimed, recomputed later).",
            m.num_preemptions);
  w.counter("tessera:prefix_cache_waits",
            "Admissions put off a step because a running request was computing the same prompt prefix.",
            m.prefix_cache_waits);
  w.counter("tessera:prompt_tokens", "Prefill tokens processed.", m.prompt_tokens);
  w.counter("tessera:generation_tokens", "Generated tokens.", m.generation_tokens);
  w.counter("tessera:requests_finished", "Requests finished for any reason (aborts included).",
            m.num_requests_finished);
  w.counter("tessera:request_aborted", "Requests aborted (client gone, shutdown).",
            m.num_requests_aborted);
  w.counter("tessera:request_nonfinite_logits", "Requests failed because the model produced NaN/Inf logits.",
            m.num_requests_nonfinite);
  w.counter("tessera:kv_cache_evictions", "Cached KV blocks evicted for reuse.", m.num_kv_evictions);
  w.counter("tessera:kv_cache_cow_copies", "Copy-on-write copies of shared KV blocks.", m.num_cow_copies);
  w.counter("tessera:kv_cache_window_releases",
            "KV blocks sliding-window layers gave back once behind their window.", m.num_kv_window_releases);
  w.counter("tessera:engine_steps", "Engine steps (schedule -> forward -> update).", m.num_steps);
  w.counter("tessera:spec_decode_num_drafts", "Steps with speculative proposals.", m.spec_num_drafts);
  w.counter("tessera:spec_decode_num_draft_tokens", "Proposed draft tokens.", m.spec_num_draft_tokens);
  w.counter("tessera:spec_decode_num_accepted_tokens", "Accepted draft tokens.",
            m.spec_num_accepted_tokens);
  w.header("tessera:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Accepted draft tokens per draft position.");
  for (size_t i = 0; i < m.spec_accepted_per_position.size(); ++i) {
    w.sample("tessera:spec_decode_num_accepted_tokens_per_pos_total", fmt::format(",position=\"{}\"", i),
             m.spec_accepted_per_position[i]);
  }
  w.histogram("tessera:time_to_first_token_seconds", "Time to first token (seconds).",
              m.time_to_first_token);
  w.histogram("tessera:inter_token_latency_seconds", "Time between output tokens (seconds).",
              m.inter_token_latency);
  w.histogram("tessera:e2e_request_latency_seconds", "End-to-end request latency (seconds).",
              m.e2e_request_latency);
  w.histogram("tessera:request_queue_time_seconds", "Time a request waited before it first ran "
              "(seconds).", m.request_queue_time);
  if (!m.disk_read_seconds.bounds.empty()) {  // the KV disk tier is configured (--kv-cache-dir)
    w.gauge("tessera:kv_disk_enabled", "1 while the KV disk tier is on (an I/O error turns it off).",
            m.disk_tier_enabled ? 1 : 0);
    w.counter("tessera:kv_disk_lookups", "Requests whose prompt was looked up on the KV disk tier.", m.disk_lookups);
    w.counter("tessera:kv_disk_hit_blocks", "KV blocks read from disk into the pool.", m.disk_hit_blocks);
    w.counter("tessera:kv_disk_hit_tokens", "Prompt tokens served from the KV disk tier.", m.disk_hit_tokens);
    w.counter("tessera:kv_disk_writes", "KV blocks written to disk.", m.disk_writes);
    w.counter("tessera:kv_disk_write_drops", "KV blocks not written (queue full, tier off, larger than the budget).",
              m.disk_write_drops);
    w.counter("tessera:kv_disk_write_errors", "KV block writes that failed.", m.disk_write_errors);
    w.counter("tessera:kv_disk_evictions", "KV block files deleted for the size budget.", m.disk_evictions);
    w.counter("tessera:kv_disk_corrupt_blocks", "KV block files that failed verification (deleted, recomputed).",
              m.disk_corrupt_blocks);
    w.counter("tessera:kv_disk_written_bytes", "Bytes written to the KV disk tier.", m.disk_bytes_written);
    w.counter("tessera:kv_disk_read_bytes", "Bytes read from the KV disk tier.", m.disk_bytes_read);
    w.gauge("tessera:kv_disk_bytes", "Bytes of KV block files on disk (this model's namespace).", m.disk_bytes);
    w.gauge("tessera:kv_disk_files", "KV block files on disk (this model's namespace).", m.disk_files);
    w.histogram("tessera:kv_disk_read_seconds", "Time to read and verify one KV block file (seconds).",
                m.disk_read_seconds);
    w.histogram("tessera:kv_disk_write_seconds", "Time to write one KV block file (seconds).", m.disk_write_seconds);
  }
  w.counter("tessera:http_requests", "HTTP requests routed.", s.num_http_requests);
  w.counter("tessera:http_errors_4xx", "HTTP error responses with a 4xx status.", s.num_http_errors_4xx);
  w.counter("tessera:http_errors_5xx", "HTTP error responses with a 5xx status.", s.num_http_errors_5xx);
  w.counter("tessera:client_disconnects", "Requests aborted because the client went away (streaming or not).",
            s.num_client_disconnects);
  w.gauge("tessera:requests_in_flight", "Generate requests accepted by the server and not yet "
          "answered.", s.num_requests_in_flight);
  return w.take();
}

std::string render_lora_metrics(const MetricsSnapshot& m, const std::vector<LoraAdapterInfo>& loaded,
                                const std::string& model_name, double now_unix_seconds) {
  if (loaded.empty() && m.lora_requests.empty()) return "";
  Writer w(model_name);
  std::string running, waiting;
  for (const LoraRequestCounts& c : m.lora_requests) {
    if (c.running > 0) running += (running.empty() ? "" : ",") + c.name;
    if (c.waiting > 0) waiting += (waiting.empty() ? "" : ",") + c.name;
  }
  w.header("vllm:lora_requests_info", "gauge", "LoRA adapters with running and waiting requests (labels); the time.");
  w.sample("vllm:lora_requests_info",
           fmt::format(",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\",max_lora=\"{}\"",
                       escape_label_value(running), escape_label_value(waiting), m.max_loras),
           fmt::format("{:.3f}", now_unix_seconds));
  if (!m.lora_requests.empty()) {
    w.header("tessera:lora_requests_running", "gauge", "Requests of a LoRA adapter scheduled and not finished.");
    for (const LoraRequestCounts& c : m.lora_requests) {
      w.sample("tessera:lora_requests_running", fmt::format(",lora_name=\"{}\"", escape_label_value(c.name)), c.running);
    }
    w.header("tessera:lora_requests_waiting", "gauge", "Requests of a LoRA adapter not yet scheduled.");
    for (const LoraRequestCounts& c : m.lora_requests) {
      w.sample("tessera:lora_requests_waiting", fmt::format(",lora_name=\"{}\"", escape_label_value(c.name)), c.waiting);
    }
  }
  if (!loaded.empty()) {
    w.header("tessera:lora_load_seconds", "gauge", "Time a loaded LoRA adapter took to read and check (seconds).");
    for (const LoraAdapterInfo& a : loaded) {
      w.sample("tessera:lora_load_seconds", fmt::format(",lora_name=\"{}\"", escape_label_value(a.name)), a.load_seconds);
    }
  }
  return w.take();
}

std::string render_vllm_compatible(const MetricsSnapshot& m, const ModelInfo& info,
                                   const std::string& model_name) {
  Writer w(model_name);
  w.gauge("vllm:num_requests_running", "Requests in the running batch.", m.num_requests_running);
  w.gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", m.num_requests_waiting);
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage: fraction of blocks in use (0..1).", m.kv_cache_usage);
  w.counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
            m.prefix_cache_queries);
  w.counter("vllm:prefix_cache_hits", "Prompt tokens served from the prefix cache.",
            m.prefix_cache_hits);
  w.header("vllm:cache_config_info", "gauge", "The KV cache in force (labels); always 1.");
  w.sample("vllm:cache_config_info",
           fmt::format(",block_size=\"{}\",num_gpu_blocks=\"{}\",cache_dtype=\"{}\",enable_prefix_caching=\"{}\"",
                       info.block_size, info.num_kv_blocks, escape_label_value(info.kv_dtype),
                       info.enable_prefix_caching ? "True" : "False"),
           1);
  return w.take();
}

}  // namespace tessera::server
