// Engine metrics: a plain snapshot the server renders as Prometheus text (names modeled on vLLM's,
// prefixed `tessera:`). Counters are cumulative since start-up; histograms keep bucket counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct Histogram {
  std::vector<double> bounds;      // upper bounds of the buckets, ascending (seconds)
  std::vector<uint64_t> counts;    // [bounds.size() + 1]: per bucket, the last is +Inf
  double sum = 0.0;
  uint64_t count = 0;

  static Histogram with_bounds(std::vector<double> bounds);
  void observe(double value);
};

// Requests of one LoRA adapter (vLLM's vllm:lora_requests_info, per adapter).
struct LoraRequestCounts {
  std::string name;
  int32_t running = 0;   // admitted and scheduled at least once
  int32_t waiting = 0;   // not yet scheduled (queued, or held back by max_loras)
};

struct MetricsSnapshot {
  // Gauges.
  int32_t num_requests_running = 0;
  int32_t num_requests_waiting = 0;
  double kv_cache_usage = 0.0;           // 0..1 of blocks in use
  int32_t num_kv_blocks_total = 0;
  int32_t num_kv_blocks_free = 0;
  int32_t num_kv_blocks_cached = 0;
  int32_t num_kv_blocks_used = 0;        // held by at least one request
  int32_t peak_num_kv_blocks_used = 0;   // the most blocks held at once since start
  int32_t peak_num_requests_running = 0;  // the most sequences running at once since start
  int64_t num_waiting_uncached_tokens = 0;  // tokens of waiting requests not yet computed (prefix
                                            // matches are found at admission, so not subtracted)
  // Counters.
  int64_t prefix_cache_queries = 0;      // prompt tokens looked up
  int64_t prefix_cache_hits = 0;         // of those, served from the cache
  int64_t num_preemptions = 0;
  int64_t prefix_cache_waits = 0;        // admissions put off while another request computed the prefix
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t num_requests_finished = 0;
  int64_t num_requests_aborted = 0;
  int64_t num_requests_nonfinite = 0;    // failed: the model's logits held NaN/Inf
  int64_t num_kv_evictions = 0;
  int64_t num_cow_copies = 0;
  int64_t num_kv_window_releases = 0;    // blocks sliding-window groups gave back behind the window
  int64_t num_steps = 0;
  int64_t lane_steps_used = 0;           // sum over steps of sequences in the batch
  int64_t lane_steps_total = 0;          // sum over steps of max_num_seqs (batch occupancy = used/total)
  int64_t padding_lane_steps = 0;        // static policy: finished lanes computed as pad rows
  int64_t spec_num_drafts = 0;           // steps with proposals
  int64_t spec_num_draft_tokens = 0;     // proposed tokens
  int64_t spec_num_accepted_tokens = 0;  // accepted proposals
  std::vector<int64_t> spec_accepted_per_position;  // [k]: accepted at draft position i
  double spec_propose_seconds = 0.0;     // wall time in the proposer (draft forwards, catch-up, lookups)
  int64_t spec_catch_up_tokens = 0;      // tokens the draft model fed to catch up (prompts, gaps)
  int64_t spec_draft_prefix_hit_tokens = 0;  // committed tokens the draft's prefix cache served
  // Gauges: the speculation cost model's measured times (EMAs, seconds; 0 = not measured yet).
  std::vector<double> spec_step_seconds; // [k + 2]: [n] = decode step of n tokens, proposer excluded
  double spec_proposer_forward_seconds = 0.0;  // one proposer forward (draft model) or lookup
  double spec_catch_up_seconds_per_token = 0.0;  // draft catch-up
  // The KV disk tier (serve --kv-cache-dir; all 0 without it).
  bool disk_tier_enabled = false;        // gauge: configured and not turned off by an I/O error
  int64_t disk_lookups = 0;              // requests whose prompt was looked up on disk at admission
  int64_t disk_hit_blocks = 0;           // blocks read from disk into the pool
  int64_t disk_hit_tokens = 0;           // prompt tokens those blocks added to the prefix hit
  int64_t disk_writes = 0;               // blocks written
  int64_t disk_write_drops = 0;          // blocks not written: queue full, tier off, too large
  int64_t disk_write_errors = 0;         // writes that failed (I/O errors)
  int64_t disk_evictions = 0;            // files deleted for the size budget
  int64_t disk_corrupt_blocks = 0;       // files that failed verification (deleted, recomputed)
  int64_t disk_bytes_written = 0;
  int64_t disk_bytes_read = 0;
  int64_t disk_bytes = 0;                // gauge: bytes of this namespace's files (estimate)
  int64_t disk_files = 0;                // gauge
  Histogram disk_read_seconds;           // per block read (open, read, verify)
  Histogram disk_write_seconds;          // per block written (encode, write, rename, evictions)
  // LoRA: the adapters with requests in flight, and the step limit.
  std::vector<LoraRequestCounts> lora_requests;
  int32_t max_loras = 0;
  // Histograms (seconds).
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_request_latency;
  Histogram request_queue_time;
};

}  // namespace tessera
