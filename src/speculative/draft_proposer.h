// DraftProposer: speculation with a small draft model that shares the target's vocabulary. It owns
// the draft LlamaModel, its own paged KV cache (KvStorage + a kv::KvCacheManager, prefix caching
// off) and a ForwardWorkspace; the compute pool is lent per call (the engine's).
//
// One propose() call serves every speculating sequence of a step, batched:
//
//   committed tokens T = prompt ++ output (L tokens); the draft's KV holds `fed` (its own record)
//   1. roll back:   c = common prefix of fed and T, capped at L - 1 (the last token is always fed,
//                   its logits give the first draft); blocks past c are given back (truncate)
//   2. catch up:    feed T[c, L) as one chunk per sequence, all sequences in one ragged batch
//                   (split over several forwards only when the chunks exceed the token budget;
//                   T is copied into one buffer, so a chunk spanning prompt and output is one)
//                   -> logits after T[L-1] -> d_1
//   3. k - 1 steps: feed d_j at position L + j - 1, one token per sequence, batched -> d_{j+1}
//
//   positions:  0 ........ c ........ L-1 | L    L+1  ...  L+k-2 | L+k-1
//   fed after:  [ kept ][ caught up      ][ d_1  d_2  ...  d_k-1 ]   (d_k is never fed)
//
// After verification the target accepts a prefix of the drafts and appends one token, so the next
// call's step 1 keeps exactly the accepted drafts' KV and overwrites the rest: no notification of
// the verification outcome is needed.
//
// Prefix caching (on by default, as for the target): full blocks of committed tokens (never drafts)
// enter the draft's own prefix cache after their catch-up, and a sequence the draft meets for the
// first time starts from the longest cached prefix of its T (capped at L - 1 tokens, blocks keyed
// by the request's cache salt), so a shared system prompt or an earlier turn of a chat is not
// prefilled by the draft again. Rolled-back positions are never inside a cached block: T only
// grows, so the common prefix of step 1 is at least the previous call's L.
//
// Greedy requests get greedy drafts (argmax after the request's penalties); sampling requests get
// drafts drawn from q = Sampler::compute_probs(draft logits) and the q rows [k][vocab] for the
// RejectionSampler, which makes the output exactly the target's distribution. Draft draws use a
// per-sequence stream (seed ^ seq_id), never the request's own RNG.
//
// Not thread-safe: the engine thread calls it between steps.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"
#include "model/llama_model.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "speculative/proposer.h"
#include "tessera/engine_defaults.h"
#include "tessera/sampling_params.h"
#include "util/kv_dtype.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tessera::speculative {

struct DraftProposerConfig {
  int32_t num_speculative_tokens = defaults::kNumSpeculativeTokens;  // k at most per sequence and step
  int32_t max_num_seqs = 8;                 // sequences proposed for in one call at most
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;  // tokens per draft forward at most
  int32_t max_model_len = defaults::kMaxModelLen;  // positions per sequence at most
  int32_t block_size = defaults::kBlockSize;       // token slots per draft KV block
  int64_t kv_cache_bytes = int64_t{256} << 20;  // the draft's own KV budget (bytes)
  KvDType kv_dtype = KvDType::kF16;
  bool enable_prefix_caching = true;        // committed full blocks shared across sequences
  int32_t num_threads = 1;                  // threads of the pool passed to propose()
  uint64_t seed = 0;                        // draft sampling streams are Rng(seed ^ seq_id)
};

struct DraftStats {
  int64_t num_forwards = 0;                 // draft forward passes
  int64_t num_tokens_fed = 0;               // tokens run through the draft (catch-up + drafts)
  int64_t num_cache_full = 0;               // sequences skipped because the draft KV was full
  int64_t num_prefix_hit_tokens = 0;        // committed tokens served by the draft's prefix cache
};

// What one propose() call did, with wall times (the cost model's inputs, see speculator.h).
struct DraftCallStats {
  int32_t num_seqs = 0;                     // sequences that got drafts
  int32_t num_catch_up_tokens = 0;          // tokens fed in step 2 (1-2 per sequence when it is
                                            // up to date: the last committed token(s))
  int32_t num_catch_up_forwards = 0;        // forwards of step 2 (they also yield d_1)
  double catch_up_seconds = 0.0;
  int32_t num_draft_forwards = 0;           // single-token forwards of step 3 (k - 1 at most)
  double draft_seconds = 0.0;
};

// Same vocabulary size and the same token strings (a sample of ids: the first 64, the last 64 and
// a stride through the middle). kInvalidArgument with the first difference otherwise.
Status check_vocab_compatible(const LlamaModel& target, const LlamaModel& draft);

class DraftProposer final : public Proposer {
 public:
  // Loads the draft GGUF and checks it against the target's vocabulary.
  static Result<std::unique_ptr<DraftProposer>> load(const std::string& draft_path,
                                                     const LlamaModel& target,
                                                     const DraftProposerConfig& config);
  DraftProposer(std::unique_ptr<LlamaModel> draft, const DraftProposerConfig& config);

  // Proposes for up to max_num_seqs requests (the rest get no proposal). results[i] answers
  // requests[i]. `pool` must have config.num_threads threads.
  std::vector<DraftResult> propose(std::span<const DraftRequest> requests, ThreadPool& pool);

  // Forgets a sequence (finished, aborted): its draft KV blocks are freed. Unknown ids: no-op.
  void release(int64_t seq_id) override;

  // Proposer: propose() into `results`; the cost of the call from last_call() (catch-up counted
  // apart only when it went beyond the one or two tokens of every proposal); num_reusable().
  void propose_batch(std::span<const DraftRequest> requests, ThreadPool& pool,
                     std::span<DraftResult> results) override;
  ProposeCost last_cost() const override;
  int32_t num_catch_up(const DraftRequest& request) override;

  // Tokens whose KV the draft holds for the sequence (0 if unknown).
  int32_t num_computed(int64_t seq_id) const;
  // Tokens of the request's T the draft would not have to feed: num_computed() for a sequence it
  // holds, else the longest cached prefix it would start from. No side effects.
  int32_t num_reusable(const DraftRequest& request);
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t num_free_blocks() const { return kv_manager_.num_free_blocks(); }
  void check_integrity() const { kv_manager_.check_integrity(); }  // the draft KV's block pool
  const LlamaModel& model() const { return *model_; }
  const DraftProposerConfig& config() const { return config_; }
  const DraftStats& stats() const { return stats_; }
  const DraftCallStats& last_call() const { return last_call_; }

 private:
  struct SeqState {
    std::vector<int32_t> fed;               // [num_computed] tokens whose KV is in the draft cache
    std::vector<kv::BlockHash> hashes;      // [L / block_size] chained hashes of T's full blocks
    sample::Rng rng;                        // draft sampling stream
  };
  // One ragged forward over `rows` (seq index into the call, chunk of tokens, start position);
  // logits of the sequences whose `wants_logits` is set land in logits_ in the order given.
  struct Chunk {
    size_t request = 0;                     // index into the call's requests
    std::span<const int32_t> tokens;        // tokens fed
    int32_t start_position = 0;             // position of tokens[0]
    bool wants_logits = false;              // last row's logits wanted
  };
  void forward(std::span<const Chunk> chunks, std::span<const DraftRequest> requests, ThreadPool& pool);
  // Picks the next draft token of request i from its logits row; appends q when sampling.
  void choose(const DraftRequest& request, SeqState& state, const float* logits, DraftResult& result);

  DraftProposerConfig config_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvStorage> kv_;
  kv::KvCacheManager kv_manager_;
  ForwardWorkspace workspace_;
  sample::Sampler sampler_;
  std::unordered_map<int64_t, SeqState> seqs_;
  DraftStats stats_;
  DraftCallStats last_call_;
  // propose() scratch, per request of the call: committed length L, drafts k (0 = skipped), next
  // position to feed, state; T of every request back to back (committed_begin_ = offsets).
  std::vector<int32_t> num_tokens_, num_drafts_, next_pos_, fed_token_;
  std::vector<SeqState*> states_;
  std::vector<int32_t> committed_;
  std::vector<size_t> committed_begin_;
  std::vector<Chunk> chunks_;
  std::vector<int32_t> probe_tokens_;       // num_reusable() scratch: T and its block hashes
  std::vector<kv::BlockHash> probe_hashes_;
  // Batch scratch, capacity reserved once.
  ForwardBatchBuilder batch_;               // one forward's ragged batch (model/forward_batch.h)
  std::vector<float> logits_;               // [max_num_seqs][vocab]
  std::vector<float> probs_row_;            // [vocab]
};

}  // namespace tessera::speculative
