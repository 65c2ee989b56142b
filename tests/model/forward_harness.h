// Test harness: runs one sequence through LlamaModel::forward with a paged cache whose block table
// is simply 0, 1, 2, ... — chunked as the caller asks — so model tests need no scheduler.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "model/llama_model.h"

namespace tessera::testing {

class SingleSequence {
 public:
  SingleSequence(const LlamaModel& model, int32_t max_context, int32_t block_size = 16,
                 int32_t num_threads = 2, kernels::KvDType dtype = kernels::KvDType::kF32)
      : model_(model),
        block_size_(block_size),
        pool_(num_threads),
        kv_(model.config(), (max_context + block_size - 1) / block_size, block_size, dtype),
        ws_(model.config(), max_context, 1, max_context, num_threads) {
    for (int32_t b = 0; b < kv_.num_blocks(); ++b) blocks_.push_back(b);
  }

  // Feeds `tokens` at the next positions as one chunk; returns the logits of the last one [vocab].
  std::vector<float> feed(const std::vector<int32_t>& tokens) { return feed_rows(tokens, false); }

  // Same, but the logits of every token of the chunk: [tokens.size()][vocab] (all_rows), or of
  // the last one only.
  std::vector<float> feed_rows(const std::vector<int32_t>& tokens, bool all_rows = true) {
    const auto n = static_cast<int32_t>(tokens.size());
    std::vector<int32_t> positions(tokens.size());
    std::vector<int64_t> slots(tokens.size());
    for (int32_t i = 0; i < n; ++i) {
      positions[i] = num_cached_ + i;
      slots[i] = positions[i];  // blocks are 0, 1, 2, ...: slot = position
    }
    const int32_t seq_len = num_cached_ + n;
    const int32_t qsl[2] = {0, n};
    const int32_t num_blocks = (seq_len + block_size_ - 1) / block_size_;
    const int32_t indptr[2] = {0, num_blocks};
    std::vector<int32_t> rows;
    for (int32_t i = all_rows ? 0 : n - 1; i < n; ++i) rows.push_back(i);
    ForwardBatch batch;
    batch.tokens = tokens;
    batch.positions = positions;
    batch.attn.num_seqs = 1;
    batch.attn.num_tokens = n;
    batch.attn.query_start_loc = qsl;
    batch.attn.seq_lens = &seq_len;
    batch.attn.block_table_indptr = indptr;
    batch.attn.block_table_indices = blocks_.data();
    batch.attn.slot_mapping = slots.data();
    batch.logits_rows = rows;
    std::vector<int32_t> lora_rows;  // every row through the adapter, when one is set
    const LoraSegment segment{adapter_, 0, adapter_ ? n : 0};
    if (adapter_ != nullptr) {
      for (int32_t i = 0; i < n; ++i) lora_rows.push_back(i);
      batch.lora_rows = lora_rows;
      batch.lora_segments = {&segment, 1};
    }
    std::vector<float> logits(rows.size() * static_cast<size_t>(model_.config().vocab_size));
    model_.forward(batch, kv_, ws_, pool_, logits.data());
    num_cached_ = seq_len;
    return logits;
  }

  int32_t num_cached() const { return num_cached_; }
  // A LoRA adapter every later chunk runs through (null: the base model).
  void set_adapter(const LoraAdapter* adapter) { adapter_ = adapter; }

 private:
  const LlamaModel& model_;
  int32_t block_size_;
  ThreadPool pool_;
  KvStorage kv_;
  ForwardWorkspace ws_;
  std::vector<int32_t> blocks_;
  int32_t num_cached_ = 0;
  const LoraAdapter* adapter_ = nullptr;
};

// Every position's logits of `tokens` fed through `seq` as consecutive chunks of the given sizes
// (which must sum to tokens.size()): [tokens.size()][vocab].
inline std::vector<std::vector<float>> feed_in_chunks(SingleSequence& seq, const std::vector<int32_t>& tokens,
                                                      const std::vector<size_t>& chunks, int32_t vocab) {
  const auto v = static_cast<size_t>(vocab);
  std::vector<std::vector<float>> out;
  size_t start = 0;
  for (size_t chunk : chunks) {
    const std::vector<int32_t> part(tokens.begin() + start, tokens.begin() + start + chunk);
    const std::vector<float> rows = seq.feed_rows(part);
    for (size_t r = 0; r < chunk; ++r) out.emplace_back(rows.begin() + r * v, rows.begin() + (r + 1) * v);
    start += chunk;
  }
  return out;
}

inline int32_t argmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

}  // namespace tessera::testing
