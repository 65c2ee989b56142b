// The plain data crossing the scheduler <-> model runner boundary, once per step:
//   SchedulerOutput out = scheduler.schedule();
//   ModelRunnerOutput r = runner.execute(out);       // CoW copies, forward, sampling
//   auto updates = scheduler.update_from_output(out, r);
// No pointers into scheduler state: everything is copied ids and vectors.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"

namespace tessera::sched {

// One sequence's work this step. Its tokens occupy positions
// [start_position, start_position + token_ids.size()) and write KV into the slots
// block_table[p / block_size] * block_size + p % block_size.
struct ScheduledSeq {
  int64_t seq_id = 0;               // sequence id (key for per-sequence runner state)
  int64_t request_id = 0;           // user request id (== seq_id unless a forked sample)
  int32_t sample_index = 0;         // which of the request's n samples (seeds its RNG stream)
  std::vector<int32_t> token_ids;   // [num_tokens] tokens to run, from num_computed_tokens on
  int32_t start_position = 0;       // position of token_ids[0] (== num_computed_tokens)
  // [num_groups][ceil((start_position + num_tokens) / block_size)] block ids, group-major: the
  // table of each KV-cache group (SchedulerConfig::kv_group_windows; one group unless the model has
  // sliding-window layers), a sliding group's with the null block 0 before its window.
  std::vector<int32_t> block_table;
  int32_t num_spec_tokens = 0;      // the last num_spec_tokens of token_ids are drafts
  bool needs_logits = false;        // the chunk reaches the sequence's last known token: sample.
                                    // Logit rows: the last num_spec_tokens + 1 positions.
  int32_t num_samples = 1;          // tokens to draw from the last row: n when a parallel-sampling
                                    // prompt completes (one per sample), else 1
  bool is_new = false;              // first step since (re)admission: reset per-sequence state
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;            // in schedule order
  std::vector<kv::CowCopy> cow_copies;       // copy src -> dst blocks, in order, before the forward
  std::vector<int64_t> preempted_ids;        // sequences preempted this step (KV freed)
  std::vector<int64_t> finished_ids;         // sequences finished or aborted since the last step
  int32_t num_scheduled_tokens = 0;          // sum of token_ids sizes (<= max_num_batched_tokens)
  int32_t num_idle_lanes = 0;                // static policy: batch lanes whose request is done
};

// The runner's answer: sampled_token_ids[i] belongs to SchedulerOutput::seqs[i]. Empty when that
// sequence did not need logits; otherwise 1 token, or num_samples tokens (parallel sampling), or
// accepted draft tokens + 1 corrected/bonus token (speculation).
struct ModelRunnerOutput {
  std::vector<std::vector<int32_t>> sampled_token_ids;  // [seqs.size()][variable]
};

// What update_from_output reports per sequence that got tokens or finished.
struct RequestUpdate {
  int64_t seq_id = 0;                  // sequence id
  int64_t request_id = 0;              // user request id
  int32_t sample_index = 0;            // which sample
  std::vector<int32_t> new_token_ids;  // tokens appended this step (after stop truncation)
  RequestStatus status = RequestStatus::kRunning;  // finished states carry the reason
  bool finished() const { return is_finished(status); }
};

}  // namespace tessera::sched
