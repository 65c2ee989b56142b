// Request: one sequence as the scheduler tracks it, plain data. A user request with n > 1 samples
// starts as one root sequence (sample 0); when its prompt has been computed the runner draws n first
// tokens from the last prompt position and the scheduler forks n - 1 child sequences that share the
// prompt's KV blocks (copy-on-write on the last partial block). Each child is then a Request of its
// own with parent_id = the root's id.
// Token layout: tokens() = prompt ++ output_ids; positions [0, num_computed_tokens) have KV in the
// cache; spec_token_ids are draft tokens proposed after them, never part of tokens() (and never
// cached) until the runner accepts them. The prompt is stored once per user request (PromptIds):
// the engine's request state, the root and every forked sample hold the same vector.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "tessera/finish_reason.h"
#include "tessera/sampling_params.h"

namespace tessera::sched {

// Ordered so that is_finished(s) is s > kPreempted.
enum class RequestStatus : uint8_t {
  kWaiting,
  kRunning,
  kPreempted,         // KV freed, back in the waiting queue, recomputed on resumption
  kFinishedStopped,   // EOS or a stop token (or a stop string, reported by the engine)
  kFinishedLength,    // max_tokens or max_model_len reached
  kFinishedAborted,   // client went away or cancelled
  kFinishedError,     // the engine failed this request
};

constexpr bool is_finished(RequestStatus s) { return s > RequestStatus::kPreempted; }
// The FinishReason of a finished status (kNone otherwise), and its name from the one table
// (tessera/finish_reason.h: "stop", "length", "abort", "error"; "" while not finished).
FinishReason finish_reason_of(RequestStatus s);
const char* finish_reason(RequestStatus s);
const char* request_status_name(RequestStatus s);

// The stop data the scheduler checks on every sampled token. Stop strings are the engine's.
struct StopParams {
  int32_t max_tokens = 256;              // generated tokens at most (per sample)
  int32_t min_tokens = 0;                // EOS and stop tokens are ignored before this many
  std::vector<int32_t> eos_token_ids;    // the model's EOS id(s)
  std::vector<int32_t> stop_token_ids;   // extra stop ids from the request
  bool ignore_eos = false;               // generate past EOS (benchmarks)
};

StopParams stop_params_from(const SamplingParams& params, std::vector<int32_t> eos_token_ids);

// How a request's KV blocks are counted: tokens per block, the KV-cache groups' windows
// ([num_groups] tokens, 0 = full attention; empty = one full group: kv/kv_cache_layout.h) and the
// most tokens one step computes for one sequence (the scheduler's token budget).
struct KvBlockRule {
  int32_t block_size = 16;
  std::span<const int32_t> group_windows;
  int32_t max_tokens_per_step = 1;
};

// The KV blocks a request can ever hold at once, the one rule for "can it ever fit in the cache":
// a sequence caches at most num_prompt + max_tokens - 1 positions (the last sampled token is
// returned, never fed back); a full group holds ceil(positions / block_size) blocks, a sliding
// group at most the window behind a step plus the step (kv::max_kv_blocks_held). The engine
// refuses a request at submission with it; Scheduler::add_request checks the same rule.
int64_t max_kv_blocks_of_request(int64_t num_prompt, int64_t max_tokens, const KvBlockRule& rule);

// A request's prompt token ids, the one copy: immutable once submitted, shared by the engine's
// request state, the scheduler's sequences (the root and its forked samples) and, through spans,
// the runner and the proposers.
using PromptIds = std::shared_ptr<const std::vector<int32_t>>;

// What the engine submits (add_request).
struct NewRequest {
  int64_t id = 0;                        // caller-chosen, unique among live requests, >= 0
  PromptIds prompt;                      // [num_prompt_tokens], not empty (shared, not copied)
  StopParams stop;
  int32_t num_samples = 1;               // SamplingParams::n
  std::string cache_salt;                // prefix-cache isolation key ("" = shared cache)
};

struct Request {
  int64_t id = 0;                        // sequence id (the root's id is the user's request id)
  int64_t parent_id = 0;                 // user request id (== id for the root)
  int32_t sample_index = 0;              // 0 for the root, 1..n-1 for forked children
  int32_t num_samples = 1;               // samples still to fork from this root (1 once forked)
  PromptIds prompt;                      // [num_prompt_tokens] shared with the engine and the samples
  std::vector<int32_t> output_ids;       // [num_output_tokens] this sequence's sampled tokens
  std::vector<int32_t> spec_token_ids;   // draft tokens for the next step (cleared every update)
  StopParams stop;
  RequestStatus status = RequestStatus::kWaiting;
  int32_t num_computed_tokens = 0;       // leading positions whose KV is in the cache
  int64_t arrival_index = 0;             // FCFS order of add_request (children share the root's)
  uint64_t cache_extra_key = 0;          // hash_cache_salt(cache_salt)
  std::vector<kv::BlockHash> block_hashes;  // [num_tokens / block_size], extended on every append
  int32_t num_preemptions = 0;           // times this sequence was preempted

  int32_t num_prompt_tokens() const { return static_cast<int32_t>(prompt->size()); }
  int32_t num_output_tokens() const { return static_cast<int32_t>(output_ids.size()); }
  int32_t num_tokens() const { return num_prompt_tokens() + num_output_tokens(); }
  int32_t num_tokens_with_spec() const {
    return num_tokens() + static_cast<int32_t>(spec_token_ids.size());
  }
  std::span<const int32_t> output_token_ids() const { return output_ids; }
  // prompt ++ output as one run of num_tokens() ids (no copy).
  kv::TokenRun tokens() const { return {*prompt, output_ids}; }
  // Appends one token and extends the block hashes.
  void append_token(int32_t token, int32_t block_size);
};

}  // namespace tessera::sched
