// Scheduler: decides, once per engine step, which sequences run and how many tokens each.
//
// Schedule tokens, not phases. Every sequence carries one number, num_computed_tokens: how far its
// KV cache reaches into the tokens it knows (prompt ++ output ++ draft tokens). A step hands out a
// budget of max_num_batched_tokens and gives each sequence, in order, as many of its not yet
// computed tokens as fit. There is no "prefill step" and "decode step": a fresh prompt is a sequence
// far behind, a decoding sequence is one token behind, a prefix-cache hit starts a sequence ahead,
// a chunked prefill is one that got only part of the budget, and speculative verification is a
// sequence whose known tokens run k drafts past its output. All of them come out of the same loop
// and share one batch.
//
// Order within a step: running sequences first, oldest first; then waiting ones in FCFS order
// while budget, max_num_seqs and KV blocks allow. With prefix caching, a waiting sequence whose
// next uncached prompt block a running one is computing keeps its place and is passed over until
// that block is in the cache (two clients sending one system prompt compute it once). When the KV cache cannot hold a running
// sequence's next tokens, the newest running sequence is preempted (KV freed, recomputed later)
// and requeued at the head of the waiting queue; no admission happens in a step that preempted.
// A request that could never fit alone is refused at add_request, so the oldest sequence can
// always make progress: no deadlock, no starvation, no lost request.
//
// kStatic (for comparison only): a batch of up to max_num_seqs is admitted when nothing runs, and
// nothing else is admitted until every member has finished; finished members leave idle lanes,
// which the runner keeps computing as pad rows (SchedulerOutput::num_idle_lanes), as a static
// batch tensor does.
//
// Threading: not thread-safe. One engine thread owns the scheduler (add/abort between steps).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"
#include "tessera/engine_defaults.h"
#include "util/status.h"

namespace tessera::sched {

enum class SchedulerPolicy { kContinuous, kStatic };

struct SchedulerConfig {
  int32_t max_num_seqs = defaults::kMaxNumSeqs;                     // running sequences at most
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;  // token budget per step
  int32_t max_model_len = defaults::kMaxModelLen;  // prompt + output tokens per sequence at most
  int32_t long_prefill_token_threshold = 0;  // tokens one sequence gets per step at most (0 = no cap)
  bool enable_chunked_prefill = true;        // off: a prompt is scheduled whole or not at all
  int32_t block_size = defaults::kBlockSize;  // tokens per KV block
  int32_t num_blocks = 0;                    // KV blocks, the null block included
  // KV-cache groups ([num_groups] sliding window in tokens, 0 = full; empty = one full group):
  // kv::plan_kv_cache_layout of the model's layers. ScheduledSeq::block_table carries every group.
  std::vector<int32_t> kv_group_windows;
  bool enable_prefix_caching = true;
  bool record_block_events = false;          // the KV pool's stored/removed record (kv/block_events.h)
  SchedulerPolicy policy = SchedulerPolicy::kContinuous;
#ifdef NDEBUG
  bool check_integrity_every_step = false;   // run check_integrity() after schedule and update
#else
  bool check_integrity_every_step = true;
#endif
};

// Bad configurations (kInvalidArgument), e.g. unchunked prefill with a budget < max_model_len.
Status validate_scheduler_config(const SchedulerConfig& config);

struct SchedulerStats {
  int32_t num_running = 0;            // running sequences
  int32_t num_waiting = 0;            // waiting (including preempted) sequences
  int64_t num_waiting_uncached_tokens = 0;  // tokens of the waiting sequences without KV yet
  kv::KvCacheStats kv;                // blocks, usage, prefix-cache queries/hits, evictions, CoW
  int64_t num_preemptions = 0;        // total since start
  int64_t num_prefix_waits = 0;       // admissions put off a step for a prefix another sequence computes
  int64_t num_steps = 0;              // schedule() calls that scheduled something
  int64_t num_scheduled_tokens = 0;   // total tokens scheduled
  int64_t num_idle_lane_steps = 0;    // static policy: sum over steps of idle lanes
  int64_t num_finished = 0;           // sequences finished (any reason)
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);  // config must validate

  // Queues a request. kOutOfRange if it can never fit (prompt + max_tokens > max_model_len, or more
  // blocks than the cache has); kInvalidArgument for an empty prompt, duplicate id, n < 1, ...
  Status add_request(NewRequest request);
  // Aborts the sequence `id`, or all samples of user request `id`; frees every block. False if no
  // live sequence matched. `status` is the finished state they get (kFinishedError when the
  // engine fails the request, e.g. on non-finite logits).
  bool abort_request(int64_t id, RequestStatus status = RequestStatus::kFinishedAborted);
  // The engine finishes a sequence itself (a stop string matched); status must be a finished one.
  bool finish_request(int64_t seq_id, RequestStatus status);
  // Draft tokens for a running sequence's next step (speculative decoding). False if not running,
  // or if it is a parallel-sampling root that has not forked yet.
  bool set_spec_token_ids(int64_t seq_id, std::vector<int32_t> spec_token_ids);

  SchedulerOutput schedule();
  std::vector<RequestUpdate> update_from_output(const SchedulerOutput& output,
                                                const ModelRunnerOutput& runner_output);

  bool has_unfinished_requests() const { return !requests_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  std::vector<int64_t> running_ids() const { return running_; }
  std::vector<int64_t> waiting_ids() const { return {waiting_.begin(), waiting_.end()}; }
  std::optional<Request> find_request(int64_t seq_id) const;  // a copy, nullopt if not live
  SchedulerStats stats() const;
  const kv::KvCacheManager& kv_cache() const { return kv_; }
  // Blocks a lower tier read back for a waiting request, entered into the prefix cache
  // (kv::KvCacheManager::import_blocks); the caller writes their bytes before the next schedule().
  std::vector<int32_t> import_blocks(const kv::SeqTokens& seq, std::span<const kv::ImportBlock> blocks);
  // The prefix cache's stored/removed records since the last call (config.record_block_events).
  std::vector<kv::BlockEvent> drain_block_events() { return kv_.drain_block_events(); }
  const SchedulerConfig& config() const { return config_; }
  // The block counting of max_kv_blocks_of_request under this configuration (views config_).
  KvBlockRule kv_block_rule() const {
    return {config_.block_size, config_.kv_group_windows, config_.max_num_batched_tokens};
  }

  // KV integrity plus: every live sequence is in exactly one queue; waiting ones hold no blocks;
  // running ones hold blocks for at least their computed tokens.
  void check_integrity() const;

 private:
  kv::SeqTokens view(const Request& r) const;
  // Schedules up to `budget` tokens of r: 0 if nothing fits this step, nullopt if the KV cache
  // said "not now".
  std::optional<int32_t> try_schedule(Request& r, int32_t budget, SchedulerOutput& out);
  void preempt(int64_t seq_id, SchedulerOutput& out);
  // Prompt blocks r will enter into the prefix cache but has not computed yet (prefix caching on).
  void add_prompt_blocks_in_flight(const Request& r, std::unordered_set<kv::BlockHash>& in_flight) const;
  // Whether waiting r shares a prompt block another sequence is computing (r waits for it).
  bool waits_for_block_in_flight(const Request& r, const std::unordered_set<kv::BlockHash>& in_flight) const;
  void finish(Request& r, RequestStatus status);
  std::vector<int32_t> append_tokens(Request& r, std::span<const int32_t> tokens);
  void fork_samples(Request& root, std::span<const int32_t> first_tokens,
                    std::vector<RequestUpdate>& updates);
  void remove_from_queues(int64_t seq_id);

  SchedulerConfig config_;
  kv::KvCacheManager kv_;
  std::unordered_map<int64_t, Request> requests_;  // live sequences by id
  std::vector<int64_t> running_;                   // running sequence ids, oldest first
  std::deque<int64_t> waiting_;                    // waiting sequence ids, next to admit first
  std::vector<int64_t> finished_pending_;          // finished since the last schedule()
  int64_t next_arrival_index_ = 0;
  int64_t next_child_id_ = int64_t{1} << 62;       // ids of forked samples (user ids stay below)
  int32_t static_batch_size_ = 0;                  // static policy: lanes of the current batch
  int64_t num_preemptions_ = 0;
  int64_t num_prefix_waits_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_scheduled_tokens_ = 0;
  int64_t num_idle_lane_steps_ = 0;
  int64_t num_finished_ = 0;
};

}  // namespace tessera::sched
