#include "model/forward_batch.h"

#include "util/check.h"

namespace tessera {

void ForwardBatchBuilder::reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq) {
  const auto tokens = static_cast<size_t>(max_tokens);
  const auto seqs = static_cast<size_t>(max_seqs);
  tokens_.reserve(tokens);
  positions_.reserve(tokens);
  slots_.reserve(tokens);
  query_start_loc_.reserve(seqs + 1);
  seq_lens_.reserve(seqs);
  indptr_.reserve(seqs + 1);
  indices_.reserve(seqs * static_cast<size_t>(max_blocks_per_seq));
  logits_rows_.reserve(tokens);
  clear();
}

void ForwardBatchBuilder::clear() {
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  query_start_loc_.assign(1, 0);
  seq_lens_.clear();
  indptr_.assign(1, 0);
  indices_.clear();
  logits_rows_.clear();
}

void ForwardBatchBuilder::add_chunk(int64_t seq_id, std::span<const int32_t> tokens, int32_t start_position,
                                    std::span<const int32_t> block_table, int32_t block_size,
                                    int32_t num_logits_rows) {
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t first_row = num_tokens();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start_position + i;
    const auto block = static_cast<size_t>(pos / block_size);
    TESSERA_CHECK(block < block_table.size(), "seq {}: position {} has no block", seq_id, pos);
    tokens_.push_back(tokens[static_cast<size_t>(i)]);
    positions_.push_back(pos);
    slots_.push_back(int64_t{block_table[block]} * block_size + pos % block_size);
  }
  query_start_loc_.push_back(num_tokens());
  seq_lens_.push_back(start_position + n);
  const auto num_blocks = static_cast<size_t>((start_position + n + block_size - 1) / block_size);
  indices_.insert(indices_.end(), block_table.begin(), block_table.begin() + static_cast<std::ptrdiff_t>(num_blocks));
  indptr_.push_back(static_cast<int32_t>(indices_.size()));
  for (int32_t r = n - num_logits_rows; r < n; ++r) logits_rows_.push_back(first_row + r);
}

void ForwardBatchBuilder::add_padding_lane() {
  logits_rows_.push_back(num_tokens());
  tokens_.push_back(0);
  positions_.push_back(0);
  slots_.push_back(-1);
  query_start_loc_.push_back(num_tokens());
  seq_lens_.push_back(1);
  indices_.push_back(0);  // the null block
  indptr_.push_back(static_cast<int32_t>(indices_.size()));
}

ForwardBatch ForwardBatchBuilder::batch() const {
  ForwardBatch batch;
  batch.tokens = tokens_;
  batch.positions = positions_;
  batch.attn.num_seqs = num_seqs();
  batch.attn.num_tokens = num_tokens();
  batch.attn.query_start_loc = query_start_loc_.data();
  batch.attn.seq_lens = seq_lens_.data();
  batch.attn.block_table_indptr = indptr_.data();
  batch.attn.block_table_indices = indices_.data();
  batch.attn.slot_mapping = slots_.data();
  batch.logits_rows = logits_rows_;
  return batch;
}

}  // namespace tessera
