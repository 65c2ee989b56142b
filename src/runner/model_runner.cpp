#include "runner/model_runner.h"

#include <algorithm>
#include <limits>

#include "util/op_profile.h"

namespace tessera {

ModelRunner::ModelRunner(const LlamaModel& model, KvStorage& kv, const RunnerConfig& config)
    : model_(model),
      kv_(kv),
      config_(config),
      pool_(config.num_threads),
      workspace_(model.config(), config.max_num_batched_tokens, config.max_num_seqs, config.max_model_len,
                 config.num_threads),
      sampler_(model.config().vocab_size),
      rejection_sampler_(model.config().vocab_size, config.max_num_spec_tokens) {
  const auto max_tokens = static_cast<size_t>(config.max_num_batched_tokens);
  const auto max_seqs = static_cast<size_t>(config.max_num_seqs);
  tokens_.reserve(max_tokens);
  positions_.reserve(max_tokens);
  slots_.reserve(max_tokens);
  query_start_loc_.reserve(max_seqs + 1);
  seq_lens_.reserve(max_seqs);
  indptr_.reserve(max_seqs + 1);
  indices_.reserve(max_seqs * static_cast<size_t>((config.max_model_len + kv.block_size() - 1) / kv.block_size() + 1));
  logits_rows_.reserve(max_tokens);
  plain_greedy_.reserve(max_seqs);
  greedy_rows_.reserve(max_seqs);
  // Every logits row a step can ask for: each sequence's drafts + 1, within the token budget.
  const size_t max_rows = std::min(max_tokens, max_seqs * static_cast<size_t>(config.max_num_spec_tokens + 1));
  logits_.resize(max_rows * static_cast<size_t>(model.config().vocab_size));
  row_usable_.resize(max_rows);
  spec_scratch_.resize(static_cast<size_t>(config.max_num_spec_tokens + 1));
}

std::span<const float> ModelRunner::last_logits() const {
  return {logits_.data(), static_cast<size_t>(num_logits_rows_) * static_cast<size_t>(model_.config().vocab_size)};
}

void ModelRunner::build_batch(const sched::SchedulerOutput& out) {
  const int32_t block_size = kv_.block_size();
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  query_start_loc_.assign(1, 0);
  seq_lens_.clear();
  indptr_.assign(1, 0);
  indices_.clear();
  logits_rows_.clear();
  for (const sched::ScheduledSeq& s : out.seqs) {
    const auto n = static_cast<int32_t>(s.token_ids.size());
    TESSERA_CHECK(n > 0, "sequence {} scheduled with no tokens", s.seq_id);
    const int32_t first_row = static_cast<int32_t>(tokens_.size());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = s.start_position + i;
      const size_t block_index = static_cast<size_t>(pos / block_size);
      TESSERA_CHECK(block_index < s.block_table.size(), "seq {}: position {} has no block", s.seq_id, pos);
      tokens_.push_back(s.token_ids[static_cast<size_t>(i)]);
      positions_.push_back(pos);
      slots_.push_back(int64_t{s.block_table[block_index]} * block_size + pos % block_size);
    }
    query_start_loc_.push_back(static_cast<int32_t>(tokens_.size()));
    seq_lens_.push_back(s.start_position + n);
    const auto num_blocks = static_cast<size_t>((s.start_position + n + block_size - 1) / block_size);
    indices_.insert(indices_.end(), s.block_table.begin(), s.block_table.begin() + static_cast<std::ptrdiff_t>(num_blocks));
    indptr_.push_back(static_cast<int32_t>(indices_.size()));
    if (s.needs_logits) {
      for (int32_t r = n - 1 - s.num_spec_tokens; r < n; ++r) logits_rows_.push_back(first_row + r);
    }
  }
  TESSERA_CHECK(static_cast<int32_t>(tokens_.size()) <= config_.max_num_batched_tokens,
                "step of {} tokens exceeds the budget {}", tokens_.size(), config_.max_num_batched_tokens);
  append_padding_lanes(out.num_idle_lanes);
}

// Static batching runs its fixed batch as one tensor until the longest member is done: a lane
// whose request finished keeps computing a pad token (as batched `generate` loops do), so its
// weight-read and arithmetic cost stays in the step. Each idle lane is one 1-token sequence at
// position 0 that attends to slot 0 of the null block, writes no KV (slot -1) and has a logits
// row that nobody samples. Capped by the step's token budget and sequence limit.
void ModelRunner::append_padding_lanes(int32_t num_idle_lanes) {
  const int32_t room = std::min(config_.max_num_batched_tokens - static_cast<int32_t>(tokens_.size()),
                                config_.max_num_seqs - (static_cast<int32_t>(seq_lens_.size())));
  const int32_t num_pad = std::clamp(num_idle_lanes, 0, std::max(room, 0));
  for (int32_t i = 0; i < num_pad; ++i) {
    logits_rows_.push_back(static_cast<int32_t>(tokens_.size()));
    tokens_.push_back(0);
    positions_.push_back(0);
    slots_.push_back(-1);
    query_start_loc_.push_back(static_cast<int32_t>(tokens_.size()));
    seq_lens_.push_back(1);
    indices_.push_back(0);  // the null block
    indptr_.push_back(static_cast<int32_t>(indices_.size()));
  }
  num_padding_lanes_ = num_pad;
}

const RunnerOutput& ModelRunner::execute(const sched::SchedulerOutput& out, const SamplingLookup& lookup) {
  // Cleared, not rebuilt: the inner vectors keep their capacity from step to step.
  RunnerOutput& result = output_;
  result.sampled.sampled_token_ids.resize(out.seqs.size());
  for (std::vector<int32_t>& tokens : result.sampled.sampled_token_ids) tokens.clear();
  result.logprobs.resize(out.seqs.size());
  for (SampledLogprobs& lp : result.logprobs) lp.tokens.clear();
  result.num_accepted_drafts.assign(out.seqs.size(), 0);
  result.nonfinite_logits.assign(out.seqs.size(), 0);
  for (const kv::CowCopy& copy : out.cow_copies) kv_.copy_block(copy.src_block, copy.dst_block);
  num_logits_rows_ = 0;
  num_padding_lanes_ = 0;
  if (out.seqs.empty()) return result;

  profile::OpScope step_scope(profile::Op::kStep);
  {
    // A decode step gives every sequence one new token, however many sequences it batches.
    bool decode = true;
    for (const sched::ScheduledSeq& s : out.seqs) decode = decode && s.token_ids.size() == 1;
    profile::set_phase(decode ? profile::Phase::kDecode : profile::Phase::kPrefill);
    profile::OpScope scope(profile::Op::kBuildBatch);
    build_batch(out);
  }
  ForwardBatch batch;
  batch.tokens = tokens_;
  batch.positions = positions_;
  batch.attn.num_seqs = static_cast<int32_t>(seq_lens_.size());  // scheduled + padding lanes
  batch.attn.num_tokens = static_cast<int32_t>(tokens_.size());
  batch.attn.query_start_loc = query_start_loc_.data();
  batch.attn.seq_lens = seq_lens_.data();
  batch.attn.block_table_indptr = indptr_.data();
  batch.attn.block_table_indices = indices_.data();
  batch.attn.slot_mapping = slots_.data();
  batch.logits_rows = logits_rows_;
  num_logits_rows_ = static_cast<int32_t>(logits_rows_.size());
  TESSERA_CHECK(static_cast<size_t>(num_logits_rows_) * model_.config().vocab_size <= logits_.size(),
                "{} logits rows exceed the preallocated buffer", num_logits_rows_);
  model_.forward(batch, kv_, workspace_, pool_, logits_.data());

  profile::OpScope sampling_scope(profile::Op::kSampling);
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  // Plain greedy rows (no penalties, logprobs, drafts or extra samples) are independent argmaxes
  // over 49k-entry rows: a batch picks them on the pool, the same token wherever it runs.
  plain_greedy_.assign(out.seqs.size(), -1);
  greedy_rows_.clear();
  if (sampling_.size() < out.seqs.size()) sampling_.resize(out.seqs.size());
  // Every row is checked before anything samples from it (one pass over the rows, on the pool).
  pool_.for_chunks(static_cast<int64_t>(logits_rows_.size()), 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      row_usable_[static_cast<size_t>(r)] = logits_row_usable(logits_.data() + r * vocab, vocab) ? 1 : 0;
    }
  });
  size_t row = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (!s.needs_logits) continue;
    const size_t num_rows = static_cast<size_t>(s.num_spec_tokens + 1);
    for (size_t r = row; r < row + num_rows; ++r) result.nonfinite_logits[i] |= row_usable_[r] == 0 ? 1 : 0;
    if (result.nonfinite_logits[i] != 0) {
      row += num_rows;
      continue;
    }
    sampling_[i] = lookup(s);
    const SequenceSampling& ss = sampling_[i];
    if (!ss.allowed_tokens.empty()) apply_token_masks(logits_.data() + row * vocab, s.num_spec_tokens + 1, ss.allowed_tokens);
    if (ss.params != nullptr && sample::is_plain_greedy(*ss.params) && s.num_spec_tokens == 0 && s.num_samples == 1) {
      greedy_rows_.emplace_back(static_cast<int32_t>(i), row);
    }
    row += static_cast<size_t>(s.num_spec_tokens + 1);
  }
  const auto num_greedy = static_cast<int64_t>(greedy_rows_.size());
  const int64_t threads = pool_.num_threads();
  const int64_t greedy_chunk = num_greedy >= 4 ? (num_greedy + threads - 1) / threads : num_greedy;
  pool_.for_chunks(num_greedy, greedy_chunk, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const auto [i, r] = greedy_rows_[static_cast<size_t>(g)];
      plain_greedy_[static_cast<size_t>(i)] = sample::argmax_lowest_id(logits_.data() + r * vocab, static_cast<int32_t>(vocab));
    }
  });
  row = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (!s.needs_logits) continue;
    const float* rows = logits_.data() + row * vocab;
    row += static_cast<size_t>(s.num_spec_tokens + 1);
    if (result.nonfinite_logits[i] != 0) continue;  // no token: the engine fails the request
    if (plain_greedy_[i] >= 0) {
      result.sampled.sampled_token_ids[i].push_back(plain_greedy_[i]);
      continue;
    }
    sample_sequence(s, rows, sampling_[i], result.sampled.sampled_token_ids[i], result.logprobs[i],
                    result.num_accepted_drafts[i]);
  }
  return result;
}

void ModelRunner::apply_token_masks(float* rows, int32_t num_rows, std::span<const uint64_t> allowed) const {
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  const size_t words = (vocab + 63) / 64;
  TESSERA_CHECK(allowed.size() >= static_cast<size_t>(num_rows) * words, "token mask of {} words for {} rows",
                allowed.size(), num_rows);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (int32_t r = 0; r < num_rows; ++r) {
    float* row = rows + static_cast<size_t>(r) * vocab;
    const uint64_t* mask = allowed.data() + static_cast<size_t>(r) * words;
    for (size_t w = 0; w < words; ++w) {
      const uint64_t bits = mask[w];
      if (bits == ~uint64_t{0}) continue;
      const size_t end = std::min(vocab, w * 64 + 64);
      for (size_t t = w * 64; t < end; ++t) {
        if (!((bits >> (t & 63)) & 1)) row[t] = kMinusInf;
      }
    }
  }
}

bool logits_row_usable(const float* row, size_t n) {
  // NaN fails both comparisons; +Inf fails the first; -Inf (a masked token) is allowed.
  bool all_ok = true, any_finite = false;
  for (size_t j = 0; j < n; ++j) {
    const float x = row[j];
    all_ok &= x < std::numeric_limits<float>::infinity();
    any_finite |= x > -std::numeric_limits<float>::infinity();
  }
  return all_ok && any_finite;
}

void ModelRunner::sample_sequence(const sched::ScheduledSeq& seq, const float* rows, const SequenceSampling& s,
                                  std::vector<int32_t>& tokens, SampledLogprobs& logprobs,
                                  int32_t& num_accepted) {
  TESSERA_CHECK(s.params != nullptr && !s.rngs.empty(), "no sampling state for seq {}", seq.seq_id);
  const SamplingParams& params = *s.params;
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  const bool want_logprobs = params.logprobs.has_value();
  sample::SeenTokens seen{s.prompt, s.output, {}};

  if (seq.num_spec_tokens == 0) {
    // One token per sample from the last row; a parallel-sampling root draws all n here.
    for (int32_t k = 0; k < seq.num_samples; ++k) {
      const size_t stream = std::min(static_cast<size_t>(seq.sample_index + k), s.rngs.size() - 1);
      sample::SampleOutput detail;
      const int32_t token = sampler_.sample({rows, vocab}, params, seen, *s.rngs[stream],
                                            want_logprobs ? &detail : nullptr);
      tokens.push_back(token);
      if (want_logprobs) logprobs.tokens.push_back(std::move(detail));
    }
    return;
  }

  // Speculative verification: rows hold the target's logits after each of the k drafts' prefixes.
  const auto k = static_cast<size_t>(seq.num_spec_tokens);
  std::span<const int32_t> drafts(seq.token_ids.data() + seq.token_ids.size() - k, k);
  const sample::RejectionResult r = rejection_sampler_.verify_logits(
      sampler_, drafts, s.draft_probs, {rows, (k + 1) * vocab}, params, seen,
      *s.rngs[static_cast<size_t>(std::min<int32_t>(seq.sample_index, static_cast<int32_t>(s.rngs.size()) - 1))],
      spec_scratch_);
  num_accepted = r.num_accepted;
  tokens.assign(spec_scratch_.begin(), spec_scratch_.begin() + r.num_emitted());
  if (want_logprobs) {
    // Logprobs of the emitted tokens from their target rows (raw logits, as without speculation).
    for (int32_t j = 0; j < r.num_emitted(); ++j) {
      sample::SampleOutput detail;
      sampler_.logprobs_of({rows + static_cast<size_t>(j) * vocab, vocab}, tokens[static_cast<size_t>(j)],
                           params, &detail);
      logprobs.tokens.push_back(std::move(detail));
    }
  }
}

}  // namespace tessera
