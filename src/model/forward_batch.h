// ForwardBatchBuilder: the one place a ragged ForwardBatch (llama_model.h) is assembled, chunk by
// chunk, into buffers sized once. The target's ModelRunner and the draft model's DraftProposer
// both build their batches with it.
//
//   per chunk of n tokens at positions [start, start + n) of one sequence:
//     tokens, positions            += the chunk
//     slot of position p           =  block_table[p / block_size] * block_size + p % block_size
//     query_start_loc (CSR)        += end of the chunk's rows;  seq_lens += start + n
//     block_table_indices (CSR)    += the blocks covering [0, start + n)
//     logits_rows                  += its last num_logits_rows rows (drafts + 1, or 1, or 0)
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/llama_model.h"

namespace tessera {

class ForwardBatchBuilder {
 public:
  // Capacity for max_tokens tokens over max_seqs sequences of up to max_blocks_per_seq blocks:
  // within it, clear() and add_*() allocate nothing.
  void reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq);
  void clear();
  // One sequence's chunk (seq_id names it in errors). Every position needs a block in the table.
  void add_chunk(int64_t seq_id, std::span<const int32_t> tokens, int32_t start_position,
                 std::span<const int32_t> block_table, int32_t block_size, int32_t num_logits_rows);
  // A static-batching pad lane: token 0 at position 0 attending to slot 0 of the null block,
  // writing no KV (slot -1), with a logits row nobody samples.
  void add_padding_lane();

  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens_.size()); }
  int32_t num_logits_rows() const { return static_cast<int32_t>(logits_rows_.size()); }
  // Views of the buffers: valid until the next clear() or add_*().
  ForwardBatch batch() const;

 private:
  std::vector<int32_t> tokens_, positions_;          // [num_tokens]
  std::vector<int64_t> slots_;                       // [num_tokens]
  std::vector<int32_t> query_start_loc_;             // [num_seqs + 1]
  std::vector<int32_t> seq_lens_;                    // [num_seqs]
  std::vector<int32_t> indptr_, indices_;            // CSR block tables
  std::vector<int32_t> logits_rows_;                 // ascending token rows
};

}  // namespace tessera
