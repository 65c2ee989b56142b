#include "model/forward_batch.h"

#include "util/check.h"

namespace tessera {

void ForwardBatchBuilder::reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq,
                                  int32_t num_groups) {
  TESSERA_CHECK(num_groups >= 1, "a batch needs at least one KV-cache group, got {}", num_groups);
  const auto tokens = static_cast<size_t>(max_tokens);
  const auto seqs = static_cast<size_t>(max_seqs);
  tokens_.reserve(tokens);
  positions_.reserve(tokens);
  query_start_loc_.reserve(seqs + 1);
  seq_lens_.reserve(seqs);
  groups_.resize(static_cast<size_t>(num_groups));
  for (GroupBuffers& g : groups_) {
    g.slots.reserve(tokens);
    g.indptr.reserve(seqs + 1);
    g.indices.reserve(seqs * static_cast<size_t>(max_blocks_per_seq));
  }
  group_attn_.reserve(groups_.size());
  logits_rows_.reserve(tokens);
  lora_chunks_.reserve(seqs);
  lora_rows_.reserve(tokens);
  lora_segments_.reserve(seqs);
  clear();
}

void ForwardBatchBuilder::clear() {
  tokens_.clear();
  positions_.clear();
  query_start_loc_.assign(1, 0);
  seq_lens_.clear();
  for (GroupBuffers& g : groups_) {
    g.slots.clear();
    g.indptr.assign(1, 0);
    g.indices.clear();
  }
  logits_rows_.clear();
  lora_chunks_.clear();
}

void ForwardBatchBuilder::add_chunk(int64_t seq_id, std::span<const int32_t> tokens, int32_t start_position,
                                    std::span<const int32_t> block_tables, int32_t block_size,
                                    int32_t num_logits_rows, const LoraAdapter* adapter) {
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t first_row = num_tokens();
  const size_t num_entries = block_tables.size() / groups_.size();
  TESSERA_CHECK(num_entries * groups_.size() == block_tables.size(), "seq {}: {} table entries for {} groups",
                seq_id, block_tables.size(), groups_.size());
  const auto num_blocks = static_cast<size_t>((start_position + n + block_size - 1) / block_size);
  TESSERA_CHECK(num_blocks <= num_entries, "seq {}: position {} has no block", seq_id, start_position + n - 1);
  for (int32_t i = 0; i < n; ++i) {
    tokens_.push_back(tokens[static_cast<size_t>(i)]);
    positions_.push_back(start_position + i);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    GroupBuffers& b = groups_[g];
    const std::span<const int32_t> table = block_tables.subspan(g * num_entries, num_entries);
    for (int32_t pos = start_position; pos < start_position + n; ++pos) {
      b.slots.push_back(int64_t{table[static_cast<size_t>(pos / block_size)]} * block_size + pos % block_size);
    }
    b.indices.insert(b.indices.end(), table.begin(), table.begin() + static_cast<std::ptrdiff_t>(num_blocks));
    b.indptr.push_back(static_cast<int32_t>(b.indices.size()));
  }
  query_start_loc_.push_back(num_tokens());
  seq_lens_.push_back(start_position + n);
  for (int32_t r = n - num_logits_rows; r < n; ++r) logits_rows_.push_back(first_row + r);
  if (adapter != nullptr) lora_chunks_.push_back({adapter, first_row, n});
}

void ForwardBatchBuilder::add_padding_lane() {
  logits_rows_.push_back(num_tokens());
  tokens_.push_back(0);
  positions_.push_back(0);
  query_start_loc_.push_back(num_tokens());
  seq_lens_.push_back(1);
  for (GroupBuffers& b : groups_) {
    b.slots.push_back(-1);
    b.indices.push_back(0);  // the null block
    b.indptr.push_back(static_cast<int32_t>(b.indices.size()));
  }
}

ForwardBatch ForwardBatchBuilder::batch() {
  group_attn_.clear();
  for (const GroupBuffers& b : groups_) {
    kernels::AttnMetadata md;
    md.num_seqs = num_seqs();
    md.num_tokens = num_tokens();
    md.query_start_loc = query_start_loc_.data();
    md.seq_lens = seq_lens_.data();
    md.block_table_indptr = b.indptr.data();
    md.block_table_indices = b.indices.data();
    md.slot_mapping = b.slots.data();
    group_attn_.push_back(md);
  }
  ForwardBatch batch;
  batch.tokens = tokens_;
  batch.positions = positions_;
  batch.attn = group_attn_.front();
  batch.group_attn = group_attn_;
  batch.logits_rows = logits_rows_;
  // Adapted rows grouped by adapter: each chunk once, under the first chunk of its adapter.
  lora_rows_.clear();
  lora_segments_.clear();
  for (size_t i = 0; i < lora_chunks_.size(); ++i) {
    const LoraAdapter* a = lora_chunks_[i].adapter;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = lora_chunks_[j].adapter == a;
    if (seen) continue;
    LoraSegment seg{a, static_cast<int32_t>(lora_rows_.size()), 0};
    for (size_t j = i; j < lora_chunks_.size(); ++j) {
      if (lora_chunks_[j].adapter != a) continue;
      for (int32_t r = 0; r < lora_chunks_[j].num_rows; ++r) lora_rows_.push_back(lora_chunks_[j].first_row + r);
    }
    seg.end = static_cast<int32_t>(lora_rows_.size());
    lora_segments_.push_back(seg);
  }
  batch.lora_rows = lora_rows_;
  batch.lora_segments = lora_segments_;
  return batch;
}

}  // namespace tessera
