// EngineMetrics: the engine's counters and histograms (tessera/metrics.h's MetricsSnapshot). The
// engine thread writes the live copy through live() and publishes it once per step (and after
// messages); client threads read the published copy (snapshot(), under its own mutex). Also the
// conversion of the block pool's stored/removed record into the public KvEventBatch.
#pragma once
#include <mutex>
#include <optional>
#include <vector>

#include "kv/block_events.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "sched/scheduler_output.h"
#include "speculative/spec_decoder.h"
#include "tessera/engine.h"

namespace tessera {

class EngineMetrics {
 public:
  // Histograms with the latency buckets; spec_accepted_per_position sized for num_speculative_tokens.
  explicit EngineMetrics(int32_t num_speculative_tokens);

  MetricsSnapshot& live() { return live_; }  // engine thread only
  MetricsSnapshot snapshot() const;          // any thread: the last published copy

  // One step's own counts: steps, lanes used / offered / padded, and per sequence that verified
  // drafts (out.seqs[i] with num_spec_tokens > 0) its drafts and accepted tokens.
  void observe_step(const sched::SchedulerOutput& out, const RunnerOutput& result, int32_t max_num_seqs,
                    int32_t num_padding_lanes);
  // The scheduler's (and speculation's, when on) gauges into the live copy, then publishes it.
  void publish(const sched::SchedulerStats& st, const speculative::SpecDecoder* spec);

 private:
  int32_t num_speculative_tokens_;
  MetricsSnapshot live_;
  mutable std::mutex mutex_;
  MetricsSnapshot published_;
};

// The block pool's record (drained) as one public batch, events[i] made from records[i], the disk
// tier's events (medium DISK) after them; nullopt when both are empty. The records' token ids are
// moved into the events (no copy per step); every other field stays for later readers (LoRA names).
std::optional<KvEventBatch> kv_event_batch(std::vector<kv::BlockEvent>& records, int32_t block_size,
                                           std::vector<KvCacheEvent> disk_events = {});

}  // namespace tessera
