// DraftProposer: see draft_proposer.h.
#include "speculative/draft_proposer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "util/check.h"

namespace tessera::speculative {

namespace {

constexpr int32_t kVocabSampleEdge = 64;    // ids checked at each end of the vocabulary
constexpr int32_t kVocabSampleStride = 97;  // then every 97th id in between

// Blocks the byte budget buys (plus the null block), at least one full-length sequence.
int32_t draft_num_blocks(const ModelConfig& mc, const DraftProposerConfig& c) {
  const auto block_bytes = static_cast<int64_t>(KvStorage::bytes_per_token(mc, c.kv_dtype)) * c.block_size;
  const int64_t per_seq = (c.max_model_len + c.block_size - 1) / c.block_size + 1;
  const int64_t num = std::max<int64_t>(c.kv_cache_bytes / block_bytes, per_seq);
  return static_cast<int32_t>(std::min<int64_t>(num + 1, int64_t{1} << 24));
}

kv::KvCacheConfig draft_kv_config(const ModelConfig& mc, const DraftProposerConfig& c) {
  kv::KvCacheConfig kc;
  kc.num_blocks = draft_num_blocks(mc, c);
  kc.block_size = c.block_size;
  kc.enable_prefix_caching = c.enable_prefix_caching;  // committed blocks only (see the header)
  return kc;
}

// Inverse-CDF draw from a distribution summing to 1 (one uniform draw).
int32_t draw(std::span<const float> probs, sample::Rng& rng) {
  const double u = rng.uniform();
  double acc = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    acc += probs[i];
    last_nonzero = static_cast<int32_t>(i);
    if (u < acc) return last_nonzero;
  }
  return last_nonzero;  // rounding: the sum fell short of u
}

}  // namespace

Status check_vocab_compatible(const LlamaModel& target, const LlamaModel& draft) {
  const int32_t vocab = target.config().vocab_size;
  if (draft.config().vocab_size != vocab) {
    return make_error(ErrorCode::kInvalidArgument,
                      "draft model vocabulary has {} tokens, the target's has {}",
                      draft.config().vocab_size, vocab);
  }
  auto target_tokens = target.file().get_string_array("tokenizer.ggml.tokens");
  auto draft_tokens = draft.file().get_string_array("tokenizer.ggml.tokens");
  if (!target_tokens || !draft_tokens) {
    return make_error(ErrorCode::kInvalidArgument, "target or draft GGUF has no tokenizer.ggml.tokens");
  }
  if (target_tokens->size() != draft_tokens->size()) {
    return make_error(ErrorCode::kInvalidArgument, "draft tokenizer has {} tokens, the target's {}",
                      draft_tokens->size(), target_tokens->size());
  }
  const auto n = static_cast<int32_t>(target_tokens->size());
  auto check = [&](int32_t id) -> Status {
    const auto i = static_cast<size_t>(id);
    if ((*target_tokens)[i] != (*draft_tokens)[i]) {
      return make_error(ErrorCode::kInvalidArgument,
                        "draft vocabulary differs from the target's at id {}: '{}' vs '{}'", id,
                        (*draft_tokens)[i], (*target_tokens)[i]);
    }
    return ok_status();
  };
  for (int32_t id = 0; id < std::min(n, kVocabSampleEdge); ++id) TESSERA_TRY(check(id));
  for (int32_t id = kVocabSampleEdge; id < n - kVocabSampleEdge; id += kVocabSampleStride) TESSERA_TRY(check(id));
  for (int32_t id = std::max(0, n - kVocabSampleEdge); id < n; ++id) TESSERA_TRY(check(id));
  return ok_status();
}

Result<std::unique_ptr<DraftProposer>> DraftProposer::load(const std::string& draft_path,
                                                           const LlamaModel& target,
                                                           const DraftProposerConfig& config) {
  if (config.num_speculative_tokens < 1 || config.max_num_seqs < 1 || config.block_size < 1 ||
      config.max_num_batched_tokens < config.max_num_seqs || config.max_model_len < 2) {
    return make_error(ErrorCode::kInvalidArgument,
                      "bad draft proposer config: k {}, max seqs {}, block size {}, budget {}, max len {}",
                      config.num_speculative_tokens, config.max_num_seqs, config.block_size,
                      config.max_num_batched_tokens, config.max_model_len);
  }
  auto draft = LlamaModel::load(draft_path, nullptr);
  if (!draft) return draft.error().with_context("loading draft model " + draft_path);
  TESSERA_TRY(check_vocab_compatible(target, **draft));
  DraftProposerConfig c = config;
  c.max_model_len = std::min(c.max_model_len, (*draft)->config().context_length);
  return std::make_unique<DraftProposer>(std::move(*draft), c);
}

DraftProposer::DraftProposer(std::unique_ptr<LlamaModel> draft, const DraftProposerConfig& config)
    : config_(config),
      model_(std::move(draft)),
      kv_manager_(draft_kv_config(model_->config(), config)),
      workspace_(model_->config(), config.max_num_batched_tokens, config.max_num_seqs, config.max_model_len,
                 config.num_threads),
      sampler_(model_->config().vocab_size) {
  kv_ = std::make_unique<KvStorage>(model_->config(), draft_num_blocks(model_->config(), config),
                                    config.block_size, config.kv_dtype);
  const auto max_seqs = static_cast<size_t>(config.max_num_seqs);
  batch_.reserve(config.max_num_batched_tokens, config.max_num_seqs,
                 (config.max_model_len + config.block_size - 1) / config.block_size + 1);
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  logits_.resize(max_seqs * vocab);
  probs_row_.resize(vocab);
}

void DraftProposer::release(int64_t seq_id) {
  kv_manager_.free(seq_id);
  seqs_.erase(seq_id);
}

int32_t DraftProposer::num_computed(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : static_cast<int32_t>(it->second.fed.size());
}

int32_t DraftProposer::num_reusable(const DraftRequest& r) {
  if (kv_manager_.contains(r.seq_id)) return num_computed(r.seq_id);
  probe_tokens_.assign(r.prompt.begin(), r.prompt.end());
  probe_tokens_.insert(probe_tokens_.end(), r.output.begin(), r.output.end());
  probe_hashes_.clear();
  kv::extend_block_hashes(probe_hashes_, probe_tokens_, config_.block_size, r.cache_extra_key);
  return kv_manager_.get_computed_blocks({r.seq_id, probe_tokens_, probe_hashes_, r.cache_extra_key}).num_tokens;
}

void DraftProposer::forward(std::span<const Chunk> chunks, std::span<const DraftRequest> requests,
                            ThreadPool& pool) {
  batch_.clear();
  for (const Chunk& c : chunks) {
    const int64_t seq_id = requests[c.request].seq_id;
    batch_.add_chunk(seq_id, c.tokens, c.start_position, kv_manager_.block_table(seq_id), config_.block_size,
                     c.wants_logits ? 1 : 0);
  }
  TESSERA_CHECK(batch_.num_tokens() <= config_.max_num_batched_tokens,
                "draft step of {} tokens exceeds {}", batch_.num_tokens(), config_.max_num_batched_tokens);
  const ForwardBatch batch = batch_.batch();
  model_->forward(batch, *kv_, workspace_, pool, logits_.data());
  stats_.num_forwards += 1;
  stats_.num_tokens_fed += batch_.num_tokens();
}

void DraftProposer::choose(const DraftRequest& request, SeqState& state, const float* logits,
                           DraftResult& result) {
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  const sample::SeenTokens seen{request.prompt, request.output, result.tokens};
  const std::span<const float> row(logits, vocab);
  if (sample::is_greedy(*request.params)) {
    result.tokens.push_back(sampler_.argmax(row, *request.params, seen));
    return;
  }
  sampler_.compute_probs(row, *request.params, seen, probs_row_);
  const int32_t token = draw(probs_row_, state.rng);
  result.probs.insert(result.probs.end(), probs_row_.begin(), probs_row_.end());
  result.tokens.push_back(token);
}

std::vector<DraftResult> DraftProposer::propose(std::span<const DraftRequest> requests, ThreadPool& pool) {
  using Clock = std::chrono::steady_clock;
  std::vector<DraftResult> results(requests.size());
  last_call_ = {};
  const size_t num_reqs = std::min(requests.size(), static_cast<size_t>(config_.max_num_seqs));
  num_tokens_.assign(num_reqs, 0);
  num_drafts_.assign(num_reqs, 0);
  next_pos_.assign(num_reqs, 0);
  fed_token_.assign(num_reqs, 0);
  states_.assign(num_reqs, nullptr);
  // T = prompt ++ output of every request, back to back: chunks are spans into it.
  committed_.clear();
  committed_begin_.clear();
  for (size_t i = 0; i < num_reqs; ++i) {
    committed_begin_.push_back(committed_.size());
    committed_.insert(committed_.end(), requests[i].prompt.begin(), requests[i].prompt.end());
    committed_.insert(committed_.end(), requests[i].output.begin(), requests[i].output.end());
  }
  auto committed = [&](size_t i) {
    return std::span<const int32_t>(committed_).subspan(committed_begin_[i], static_cast<size_t>(num_tokens_[i]));
  };

  // 1. Roll back to the common prefix and reserve blocks for [0, L + k - 1).
  for (size_t i = 0; i < num_reqs; ++i) {
    const DraftRequest& r = requests[i];
    TESSERA_CHECK(r.params != nullptr, "draft request for seq {} has no sampling params", r.seq_id);
    const auto L = static_cast<int32_t>(r.prompt.size() + r.output.size());
    const int32_t k = std::min({r.num_drafts, config_.num_speculative_tokens, config_.max_model_len - L + 1});
    if (L < 1 || k < 1) continue;
    auto [it, inserted] = seqs_.try_emplace(r.seq_id);
    SeqState& st = it->second;
    if (inserted) st.rng = sample::Rng(config_.seed ^ static_cast<uint64_t>(r.seq_id));
    num_tokens_[i] = L;
    const std::span<const int32_t> t = committed(i);
    kv::extend_block_hashes(st.hashes, t, config_.block_size, r.cache_extra_key);
    std::optional<kv::SlotAllocation> alloc;
    int32_t common = 0;
    if (!kv_manager_.contains(r.seq_id)) {
      // First blocks of the sequence: start from the longest cached prefix of T.
      const kv::PrefixHit hit = kv_manager_.get_computed_blocks({r.seq_id, t, st.hashes, r.cache_extra_key});
      common = hit.num_tokens;
      st.fed.assign(t.begin(), t.begin() + common);
      alloc = kv_manager_.allocate_slots(r.seq_id, common, L + k - 1 - common, &hit);
      if (alloc) stats_.num_prefix_hit_tokens += common;
    } else {
      const auto mismatch = std::mismatch(st.fed.begin(), st.fed.end(), t.begin(), t.end());
      common = std::min<int32_t>(static_cast<int32_t>(mismatch.first - st.fed.begin()), L - 1);
      st.fed.resize(static_cast<size_t>(common));
      kv_manager_.truncate(r.seq_id, common);
      alloc = kv_manager_.allocate_slots(r.seq_id, common, L + k - 1 - common);
    }
    if (alloc) {
      for (const kv::CowCopy& c : alloc->cow_copies) kv_->copy_block(c.src_block, c.dst_block);
    } else {
      // The draft cache is full: this sequence sits out the step and gives its blocks back.
      stats_.num_cache_full += 1;
      release(r.seq_id);
      continue;
    }
    num_drafts_[i] = k;
    next_pos_[i] = common;
    states_[i] = &st;
    last_call_.num_seqs += 1;
  }

  // 2. Catch up: T[next_pos, L) per sequence, chunked to the token budget; the last chunk of a
  //    sequence asks for logits and yields d_1.
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  const Clock::time_point catch_up_start = Clock::now();
  for (;;) {
    chunks_.clear();
    int32_t budget = config_.max_num_batched_tokens;
    for (size_t i = 0; i < num_reqs && budget > 0; ++i) {
      if (!states_[i] || next_pos_[i] >= num_tokens_[i]) continue;
      const int32_t p = next_pos_[i];
      const int32_t take = std::min(num_tokens_[i] - p, budget);
      chunks_.push_back({i, committed(i).subspan(static_cast<size_t>(p), static_cast<size_t>(take)), p,
                         p + take == num_tokens_[i]});
      budget -= take;
    }
    if (chunks_.empty()) break;
    forward(chunks_, requests, pool);
    last_call_.num_catch_up_forwards += 1;
    size_t row = 0;
    for (const Chunk& c : chunks_) {
      SeqState& st = *states_[c.request];
      st.fed.insert(st.fed.end(), c.tokens.begin(), c.tokens.end());
      next_pos_[c.request] += static_cast<int32_t>(c.tokens.size());
      last_call_.num_catch_up_tokens += static_cast<int32_t>(c.tokens.size());
      if (!c.wants_logits) continue;
      choose(requests[c.request], st, logits_.data() + row++ * vocab, results[c.request]);
    }
  }
  // T is computed for every sequence now: its full blocks may serve later sequences.
  for (size_t i = 0; i < num_reqs; ++i) {
    if (!states_[i]) continue;
    kv_manager_.cache_blocks({requests[i].seq_id, committed(i), states_[i]->hashes, requests[i].cache_extra_key},
                             num_tokens_[i]);
  }
  const Clock::time_point draft_start = Clock::now();
  last_call_.catch_up_seconds = std::chrono::duration<double>(draft_start - catch_up_start).count();

  // 3. k - 1 single-token steps, batched over the sequences that still want drafts.
  for (int32_t j = 1;; ++j) {
    chunks_.clear();
    for (size_t i = 0; i < num_reqs; ++i) {
      if (!states_[i] || num_drafts_[i] <= j) continue;
      fed_token_[i] = results[i].tokens.back();
      chunks_.push_back({i, {&fed_token_[i], 1}, num_tokens_[i] + j - 1, true});
    }
    if (chunks_.empty()) break;
    forward(chunks_, requests, pool);
    last_call_.num_draft_forwards += 1;
    size_t row = 0;
    for (const Chunk& c : chunks_) {
      SeqState& st = *states_[c.request];
      st.fed.push_back(fed_token_[c.request]);
      choose(requests[c.request], st, logits_.data() + row++ * vocab, results[c.request]);
    }
  }
  last_call_.draft_seconds = std::chrono::duration<double>(Clock::now() - draft_start).count();
  return results;
}

void DraftProposer::propose_batch(std::span<const DraftRequest> requests, ThreadPool& pool,
                                  std::span<DraftResult> results) {
  std::vector<DraftResult> proposed = propose(requests, pool);
  for (size_t i = 0; i < results.size(); ++i) {
    if (i < proposed.size()) {
      results[i] = std::move(proposed[i]);
    } else {
      results[i].tokens.clear();
      results[i].probs.clear();
    }
  }
}

ProposeCost DraftProposer::last_cost() const {
  const DraftCallStats& call = last_call_;
  ProposeCost cost;
  if (call.num_catch_up_tokens <= 2 * call.num_seqs) {
    // Up to date: every forward was a drafting one.
    cost.num_forwards = call.num_catch_up_forwards + call.num_draft_forwards;
    cost.forward_seconds = call.catch_up_seconds + call.draft_seconds;
  } else {
    cost.num_forwards = call.num_draft_forwards;
    cost.forward_seconds = call.draft_seconds;
    cost.num_catch_up_tokens = call.num_catch_up_tokens;
    cost.catch_up_seconds = call.catch_up_seconds;
  }
  return cost;
}

int32_t DraftProposer::num_catch_up(const DraftRequest& request) {
  const auto num_total = static_cast<int32_t>(request.prompt.size() + request.output.size());
  return std::max(0, num_total - num_reusable(request) - 2);
}

}  // namespace tessera::speculative
