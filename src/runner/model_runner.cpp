#include "runner/model_runner.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
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
      rejection_sampler_(model.config().vocab_size, config.max_num_spec_tokens, config.rejection_fault) {
  const auto max_tokens = static_cast<size_t>(config.max_num_batched_tokens);
  const auto max_seqs = static_cast<size_t>(config.max_num_seqs);
  batch_.reserve(config.max_num_batched_tokens, config.max_num_seqs,
                 (config.max_model_len + kv.block_size() - 1) / kv.block_size() + 1, kv.num_groups());
  plain_greedy_.reserve(max_seqs);
  greedy_rows_.reserve(max_seqs);
  // Every logits row a step can ask for: each sequence's drafts + 1, within the token budget.
  const size_t max_rows = std::min(max_tokens, max_seqs * static_cast<size_t>(config.max_num_spec_tokens + 1));
  logits_.resize(max_rows * static_cast<size_t>(model.config().vocab_size));
  row_usable_.resize(max_rows);
  row_argmax_.resize(max_rows);
  spec_scratch_.resize(static_cast<size_t>(config.max_num_spec_tokens + 1));
}

void ModelRunner::build_batch(const sched::SchedulerOutput& out, std::span<const LoraAdapter* const> adapters) {
  const int32_t block_size = kv_.block_size();
  batch_.clear();
  TESSERA_CHECK(adapters.empty() || adapters.size() == out.seqs.size(), "{} adapters for {} sequences",
                adapters.size(), out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    TESSERA_CHECK(!s.token_ids.empty(), "sequence {} scheduled with no tokens", s.seq_id);
    // Logit rows: the last num_spec_tokens + 1 positions (drafts and the token after them).
    batch_.add_chunk(s.seq_id, s.token_ids, s.start_position, s.block_table, block_size,
                     s.needs_logits ? s.num_spec_tokens + 1 : 0, adapters.empty() ? nullptr : adapters[i]);
  }
  TESSERA_CHECK(batch_.num_tokens() <= config_.max_num_batched_tokens,
                "step of {} tokens exceeds the budget {}", batch_.num_tokens(), config_.max_num_batched_tokens);
  append_padding_lanes(out.num_idle_lanes);
}

// Static batching runs its fixed batch as one tensor until the longest member is done: a lane
// whose request finished keeps computing a pad token (as batched `generate` loops do), so its
// weight-read and arithmetic cost stays in the step. Each idle lane is one 1-token sequence at
// position 0 that attends to slot 0 of the null block, writes no KV (slot -1) and has a logits
// row that nobody samples. Capped by the step's token budget and sequence limit.
void ModelRunner::append_padding_lanes(int32_t num_idle_lanes) {
  const int32_t room = std::min(config_.max_num_batched_tokens - batch_.num_tokens(),
                                config_.max_num_seqs - batch_.num_seqs());
  const int32_t num_pad = std::clamp(num_idle_lanes, 0, std::max(room, 0));
  for (int32_t i = 0; i < num_pad; ++i) batch_.add_padding_lane();
  num_padding_lanes_ = num_pad;
}

const RunnerOutput& ModelRunner::execute(const sched::SchedulerOutput& out,
                                         std::span<const SequenceSampling> sampling) {
  forward(out);
  return sample(out, sampling);
}

void ModelRunner::forward(const sched::SchedulerOutput& out, std::span<const LoraAdapter* const> adapters) {
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
  if (out.seqs.empty()) return;

  step_scope_.emplace(profile::Op::kStep);  // closed by sample(): the runner's whole step
  {
    // A decode step gives every sequence one new token, however many sequences it batches.
    bool decode = true;
    for (const sched::ScheduledSeq& s : out.seqs) decode = decode && s.token_ids.size() == 1;
    profile::set_phase(decode ? profile::Phase::kDecode : profile::Phase::kPrefill);
    profile::OpScope scope(profile::Op::kBuildBatch);
    build_batch(out, adapters);
  }
  const ForwardBatch batch = batch_.batch();  // scheduled sequences + padding lanes
  num_logits_rows_ = batch_.num_logits_rows();
  TESSERA_CHECK(static_cast<size_t>(num_logits_rows_) * model_.config().vocab_size <= logits_.size(),
                "{} logits rows exceed the preallocated buffer", num_logits_rows_);
  model_.forward(batch, kv_, workspace_, pool_, logits_.data());
}

const RunnerOutput& ModelRunner::sample(const sched::SchedulerOutput& out, std::span<const SequenceSampling> sampling) {
  TESSERA_CHECK(sampling.size() == out.seqs.size(), "{} sampling entries for {} scheduled sequences",
                sampling.size(), out.seqs.size());
  RunnerOutput& result = output_;
  if (out.seqs.empty()) return result;
  TESSERA_CHECK(result.nonfinite_logits.size() == out.seqs.size(), "sample() without forward() of this step");
  profile::OpScope sampling_scope(profile::Op::kSampling);
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  // One read of every logits row (kernels::scan_logits, on the pool): whether it can be sampled
  // from, and its argmax. That argmax is the token of a plain greedy row (no penalties, logprobs,
  // drafts, extra samples or token mask); a plain greedy row with a token mask takes its argmax
  // after the mask, below.
  plain_greedy_.assign(out.seqs.size(), -1);
  greedy_rows_.clear();
  pool_.for_chunks(static_cast<int64_t>(batch_.num_logits_rows()), 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const kernels::LogitsScan scan = kernels::scan_logits(logits_.data() + r * vocab, static_cast<int64_t>(vocab));
      row_usable_[static_cast<size_t>(r)] = scan.usable ? 1 : 0;
      row_argmax_[static_cast<size_t>(r)] = static_cast<int32_t>(scan.argmax);
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
    const SequenceSampling& ss = sampling[i];
    const bool plain_greedy =
        ss.params != nullptr && sample::is_plain_greedy(*ss.params) && s.num_spec_tokens == 0 && s.num_samples == 1;
    if (ss.allowed_tokens.empty()) {
      if (plain_greedy) plain_greedy_[i] = row_argmax_[row];
    } else {
      apply_token_masks(logits_.data() + row * vocab, s.num_spec_tokens + 1, ss.allowed_tokens);
      if (plain_greedy) greedy_rows_.emplace_back(static_cast<int32_t>(i), row);
    }
    row += num_rows;
  }
  const auto num_greedy = static_cast<int64_t>(greedy_rows_.size());
  const int64_t threads = pool_.num_threads();
  const int64_t greedy_chunk = num_greedy >= 4 ? (num_greedy + threads - 1) / threads : num_greedy;
  if (num_greedy > 0) {
    pool_.for_chunks(num_greedy, greedy_chunk, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const auto [i, r] = greedy_rows_[static_cast<size_t>(g)];
        plain_greedy_[static_cast<size_t>(i)] =
            sample::argmax_lowest_id(logits_.data() + r * vocab, static_cast<int32_t>(vocab));
      }
    });
  }
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
    sample_sequence(s, rows, sampling[i], result.sampled.sampled_token_ids[i], result.logprobs[i],
                    result.num_accepted_drafts[i]);
  }
  step_scope_.reset();
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
