// ForwardBatchBuilder: the one place a ragged ForwardBatch (llama_model.h) is assembled, chunk by
// chunk, into buffers sized once. The target's ModelRunner and the draft model's DraftProposer
// both build their batches with it.
//
//   per chunk of n tokens at positions [start, start + n) of one sequence:
//     tokens, positions            += the chunk
//     query_start_loc (CSR)        += end of the chunk's rows;  seq_lens += start + n
//     logits_rows                  += its last num_logits_rows rows (drafts + 1, or 1, or 0)
//   and per KV-cache group g (kv/kv_cache_layout.h; one unless the model has sliding windows),
//   from that group's table T_g (a slice of the group-major block_table):
//     slot of position p           =  T_g[p / block_size] * block_size + p % block_size
//     block_table_indices (CSR)    += T_g's blocks covering [0, start + n) (null before a window)
//   and, when the chunk's sequence runs a LoRA adapter, its rows join that adapter's group: batch()
//   lists the adapted rows grouped by adapter (lora_rows, one LoraSegment per adapter, adapters
//   in order of first appearance, rows ascending within one), so each adapter's A and B are read
//   once per layer for all its rows, whatever the schedule order.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/llama_model.h"

namespace tessera {

class ForwardBatchBuilder {
 public:
  // Capacity for max_tokens tokens over max_seqs sequences of up to max_blocks_per_seq blocks in
  // each of num_groups KV-cache groups: within it, clear() and add_*() allocate nothing.
  void reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq, int32_t num_groups = 1);
  void clear();
  // One sequence's chunk (seq_id names it in errors). block_tables: [num_groups][entries],
  // group-major (sched::ScheduledSeq::block_table); every position needs a block in each table.
  void add_chunk(int64_t seq_id, std::span<const int32_t> tokens, int32_t start_position,
                 std::span<const int32_t> block_tables, int32_t block_size, int32_t num_logits_rows,
                 const LoraAdapter* adapter = nullptr);
  // A static-batching pad lane: token 0 at position 0 attending to slot 0 of the null block,
  // writing no KV (slot -1), with a logits row nobody samples.
  void add_padding_lane();

  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens_.size()); }
  int32_t num_logits_rows() const { return static_cast<int32_t>(logits_rows_.size()); }
  int32_t num_groups() const { return static_cast<int32_t>(groups_.size()); }
  // Views of the buffers: valid until the next clear() or add_*().
  ForwardBatch batch();

 private:
  struct GroupBuffers {                              // one KV-cache group's addressing
    std::vector<int64_t> slots;                      // [num_tokens]
    std::vector<int32_t> indptr, indices;            // CSR block tables
  };
  std::vector<int32_t> tokens_, positions_;          // [num_tokens]
  std::vector<int32_t> query_start_loc_;             // [num_seqs + 1]
  std::vector<int32_t> seq_lens_;                    // [num_seqs]
  std::vector<GroupBuffers> groups_ = std::vector<GroupBuffers>(1);  // [num_groups]
  std::vector<kernels::AttnMetadata> group_attn_;    // [num_groups], refreshed by batch()
  std::vector<int32_t> logits_rows_;                 // ascending token rows
  struct LoraChunk {
    const LoraAdapter* adapter;
    int32_t first_row, num_rows;
  };
  std::vector<LoraChunk> lora_chunks_;               // adapted chunks in add order
  std::vector<int32_t> lora_rows_;                   // [adapted rows] grouped by adapter (batch())
  std::vector<LoraSegment> lora_segments_;           // [distinct adapters] (batch())
};

}  // namespace tessera
