// EngineDiskTier: the engine's side of the KV disk tier (kv_disk/disk_tier.h does the files and
// the I/O thread). Everything here runs on the engine thread and never waits on the disk.
//
//   writes   publish() hands it the pool's stored records (kv/block_events.h): each newly cached
//            full block is keyed (its 128-bit chain key: the parent's key from the record's parent
//            hash), copied out of KvStorage (a memcpy) and queued; a key already on disk is skipped.
//   reads    a new request (drain_messages) is looked up: the pool's prefix hit, then the disk's
//            continuation of the chain (index or stat per block). When the disk extends the hit the
//            request is parked (not yet in the scheduler). Its reads are issued when it is its turn
//            to be scheduled (issue_reads: every parked request before it has issued, no older
//            request waits in the scheduler, a running slot is free and the pool's allocatable
//            blocks cover the blocks to read), so a full queue never holds read bytes or pool
//            blocks for requests that cannot run yet. The blocks are imported as they land, in
//            chain order, at most 16 per engine loop (Scheduler::import_blocks, as cached, then
//            their bytes copied in): a long prefix loads over several steps, not in one long one,
//            and the read buffers go back to the I/O thread. Once every read has answered the
//            request is handed back to be added: its admission finds the blocks as an ordinary
//            prefix hit. A corrupt or missing block ends the chain there (the rest is recomputed,
//            and written again).
//   groups   a hit of L tokens needs, in a sliding-window group (window W), only the blocks covering
//            [L - W + 1, L) (the pool's hit rule, src/kv/README.md). So a sliding group's cached
//            blocks are held back (their bytes copied) per sequence, and when the sequence ends
//            (finished, aborted, preempted) only those inside the window of its prompt's end or of
//            its last block are written: the hits a restart or the next turn of a conversation
//            asks for. Full-attention groups write every block.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_requests.h"
#include "kv/block_events.h"
#include "kv_disk/disk_tier.h"
#include "model/kv_storage.h"
#include "model/llama_model.h"
#include "sched/scheduler.h"
#include "tessera/engine.h"

namespace tessera {

class EngineDiskTier {
 public:
  // nullptr when config.kv_cache_dir is empty, or (with a warning) when the directory is unusable.
  static std::unique_ptr<EngineDiskTier> open(const EngineConfig& config, const LlamaModel& model,
                                              const EngineConfigs& derived, const KvStorage& storage);

  bool enabled() const { return tier_->enabled(); }
  int64_t max_bytes() const { return tier_->store().max_bytes(); }
  int64_t num_files() const { return tier_->store().num_files(); }
  std::string namespace_hex() const { return kv_disk::to_hex(tier_->ns()); }

  // A new request: true = parked (msg taken) while its blocks are read; false = add it now.
  bool park(EngineMessage& msg, const sched::Scheduler& scheduler);
  bool has_parked() const { return !parked_.empty(); }
  // Imports the blocks that landed, issues the reads of the parked requests whose turn it is, and
  // returns those whose reads have all answered, their blocks now in the pool, ready to add.
  std::vector<EngineMessage> ready(sched::Scheduler& scheduler, KvStorage& storage);
  // Removes a parked request (abort, shutdown); null if none.
  std::unique_ptr<ActiveRequest> take_parked(int64_t request_id);
  std::vector<int64_t> parked_ids() const;

  // The pool's records since the last step: writes for stored blocks, key bookkeeping.
  void observe_pool_events(const std::vector<kv::BlockEvent>& events, const KvStorage& storage);
  // A request's prompt length (its root sequence id is the request id), for the sliding groups'
  // prompt-end window.
  void note_prompt(int64_t seq_id, int32_t num_prompt_tokens) { prompt_len_[seq_id] = num_prompt_tokens; }
  // Sequences that ended (SchedulerOutput::finished_ids, preempted_ids): their held-back sliding
  // blocks inside the windows are written, the rest dropped. end_all: every sequence (idle engine).
  void end_sequences(std::span<const int64_t> seq_ids);
  void end_all();
  // DISK-medium events since the last call (blocks written, files evicted).
  std::vector<KvCacheEvent> drain_events();
  bool events_pending() const { return tier_->events_pending(); }  // the idle loop polls while true
  // Counters, gauges and latency histograms into a metrics snapshot. Any thread (the tier's I/O
  // thread finishes writes after the step that queued them, so Engine::metrics() reads them live).
  void fill_metrics(MetricsSnapshot& m) const;

 private:
  struct Parked {
    EngineMessage msg;
    kv::SeqTokens seq;                        // views into msg's prompt and `hashes`
    std::vector<kv::BlockHash> hashes;        // the prompt's pool hashes
    std::vector<kv::ImportBlock> blocks;      // what is read, sorted by group then index
    std::vector<kv_disk::ReadRequest> reads;  // [blocks] until issued
    std::vector<std::vector<uint8_t>> payloads;  // [blocks] filled as reads land (empty = failed)
    std::vector<uint8_t> answered;            // [blocks] 1 once its read answered
    bool issued = false;
    int32_t num_pending = 0;                  // issued reads not yet answered
    int32_t next_import = 0;                  // blocks[0, next_import) imported (or failed)
    int32_t pool_hit_tokens = 0;              // the pool's hit when parked
  };
  // Issues the reads of parked requests, oldest first, while it is their turn (see the header).
  void issue_reads(const sched::Scheduler& scheduler);
  // Imports p's landed blocks from next_import on, in order, at most `budget`; returns how many.
  int32_t import_landed(Parked& p, int32_t budget, sched::Scheduler& scheduler, KvStorage& storage);
  struct Held {  // a sliding group's block held back until its sequence ends
    int32_t block_index = 0;
    kv_disk::BlockMeta meta;
    std::vector<uint8_t> payload;
  };
  void write_held(int64_t seq_id);
  struct KeyRef {
    kv_disk::DiskKey key;
    int32_t count = 0;  // pool blocks cached under this hash (duplicates)
  };

  std::unique_ptr<kv_disk::DiskTier> tier_;
  int32_t block_size_ = 0;
  std::vector<int32_t> windows_;  // [num_groups] sliding window, 0 = full
  std::map<int64_t, Parked> parked_;  // request id (arrival order) -> state (ticket = request id)
  std::unordered_map<kv::BlockHash, KeyRef> keys_;  // pool hash -> disk key of cached blocks
  // seq id -> group -> held blocks, index ascending; bounded by the window (see observe_pool_events)
  std::unordered_map<int64_t, std::vector<std::vector<Held>>> held_;
  std::unordered_map<int64_t, int32_t> prompt_len_;  // seq id -> prompt tokens (roots only)
  std::atomic<int64_t> lookups_{0}, hit_blocks_{0}, hit_tokens_{0};
  mutable std::mutex latency_mutex_;
  mutable Histogram read_seconds_, write_seconds_;  // per block, from the tier's drained samples
};

}  // namespace tessera
