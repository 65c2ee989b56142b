#include "engine/engine_metrics.h"

#include <algorithm>
#include <chrono>

namespace tessera {

namespace {

// Seconds: the bounds of the latency histograms (TTFT, inter-token, end to end, queue).
std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

}  // namespace

EngineMetrics::EngineMetrics(int32_t num_speculative_tokens) : num_speculative_tokens_(num_speculative_tokens) {
  live_.time_to_first_token = Histogram::with_bounds(latency_buckets());
  live_.inter_token_latency = Histogram::with_bounds(latency_buckets());
  live_.e2e_request_latency = Histogram::with_bounds(latency_buckets());
  live_.request_queue_time = Histogram::with_bounds(latency_buckets());
  live_.spec_accepted_per_position.assign(static_cast<size_t>(std::max(1, num_speculative_tokens)), 0);
  published_ = live_;
}

MetricsSnapshot EngineMetrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return published_;
}

void EngineMetrics::observe_step(const sched::SchedulerOutput& out, const RunnerOutput& result, int32_t max_num_seqs,
                                 int32_t num_padding_lanes) {
  MetricsSnapshot& m = live_;
  m.num_steps += 1;
  m.lane_steps_used += static_cast<int64_t>(out.seqs.size());
  m.lane_steps_total += max_num_seqs;
  m.padding_lane_steps += num_padding_lanes;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (s.num_spec_tokens == 0 || !s.needs_logits) continue;
    const int32_t accepted = result.num_accepted_drafts[i];
    m.spec_num_drafts += 1;
    m.spec_num_draft_tokens += s.num_spec_tokens;
    m.spec_num_accepted_tokens += accepted;
    for (int32_t p = 0; p < accepted && p < static_cast<int32_t>(m.spec_accepted_per_position.size()); ++p) {
      m.spec_accepted_per_position[static_cast<size_t>(p)] += 1;
    }
  }
}

void EngineMetrics::publish(const sched::SchedulerStats& st, const speculative::SpecDecoder* spec) {
  MetricsSnapshot& m = live_;
  if (spec != nullptr) {
    const speculative::SpecCostModel& costs = spec->costs();
    m.spec_step_seconds.resize(static_cast<size_t>(std::max(0, num_speculative_tokens_)) + 2);
    for (size_t n = 1; n < m.spec_step_seconds.size(); ++n) {
      m.spec_step_seconds[n] = costs.measured_target_step_seconds(static_cast<int32_t>(n));
    }
    m.spec_proposer_forward_seconds = costs.measured_proposer_forward_seconds();
    m.spec_catch_up_seconds_per_token = costs.measured_catch_up_seconds_per_token();
    m.spec_draft_prefix_hit_tokens = spec->draft_prefix_hit_tokens();
  }
  m.num_requests_running = st.num_running;
  m.num_requests_waiting = st.num_waiting;
  m.kv_cache_usage = st.kv.usage;
  m.num_kv_blocks_total = st.kv.num_blocks_total;
  m.num_kv_blocks_free = st.kv.num_blocks_free;
  m.num_kv_blocks_cached = st.kv.num_blocks_cached;
  m.num_kv_blocks_used = st.kv.num_blocks_used;
  m.peak_num_kv_blocks_used = std::max(m.peak_num_kv_blocks_used, st.kv.num_blocks_used);
  m.peak_num_requests_running = std::max(m.peak_num_requests_running, st.num_running);
  m.num_waiting_uncached_tokens = st.num_waiting_uncached_tokens;
  m.prefix_cache_queries = st.kv.prefix_query_tokens;
  m.prefix_cache_hits = st.kv.prefix_hit_tokens;
  m.num_preemptions = st.num_preemptions;
  m.prefix_cache_waits = st.num_prefix_waits;
  m.num_kv_evictions = st.kv.num_evictions;
  m.num_cow_copies = st.kv.num_cow_copies;
  m.num_kv_window_releases = st.kv.num_window_releases;
  std::lock_guard<std::mutex> lock(mutex_);
  published_ = m;
}

std::optional<KvEventBatch> kv_event_batch(std::vector<kv::BlockEvent>& records, int32_t block_size,
                                           std::vector<KvCacheEvent> disk_events) {
  if (records.empty() && disk_events.empty()) return std::nullopt;
  KvEventBatch batch;
  batch.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  batch.block_size = block_size;
  batch.events.reserve(records.size());
  for (kv::BlockEvent& r : records) {
    KvCacheEvent& e = batch.events.emplace_back();
    switch (r.kind) {
      case kv::BlockEventKind::kStored:
        e.kind = KvCacheEvent::Kind::kBlockStored;
        if (r.has_parent) e.parent_block_hash = r.parent_hash;
        e.token_ids = std::move(r.token_ids);
        break;
      case kv::BlockEventKind::kRemoved: e.kind = KvCacheEvent::Kind::kBlockRemoved; break;
      case kv::BlockEventKind::kAllCleared: e.kind = KvCacheEvent::Kind::kAllBlocksCleared; break;
    }
    e.block_hash = r.hash;
  }
  for (KvCacheEvent& e : disk_events) batch.events.push_back(std::move(e));
  return batch;
}

}  // namespace tessera
