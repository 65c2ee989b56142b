// KvStorage: the bytes of the paged KV cache, one K and one V tensor per layer slot, f16 (default),
// f32 or q8 (int8 with per-row scales, kernels::KvDType): V [num_blocks][num_kv_heads][block_size][head_dim], K [num_blocks][num_kv_heads][head_dim]
// [block_size] (head-major, K transposed within a block for the attention's K tiles,
// kernels::KvLayer); a block is one contiguous range of each, which is all copy_block needs. The bookkeeping of
// which block belongs to whom lives in kv/ (integers only); this class only holds the data and
// copies a block when kv/ decides copy-on-write.
//
// Layer slots (kv/kv_cache_layout.h): a block holds num_slots layers' K and V. Without sliding
// windows num_slots = num_layers and layer l lives in slot l; with them (Gemma 3) the layers are
// split into KV-cache groups of num_slots layers each, and every group's layer i shares slot i:
// a block id belongs to one group at a time, so a block's slot i holds the K/V of layer i of
// whichever group owns the block. The bytes of a block are num_slots layers' worth, not all layers'.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "model/model_config.h"
#include "util/huge_buffer.h"

namespace tessera {

// Which slot of a block each layer's K/V occupies and which KV-cache group's block tables address
// it: kv::KvCacheLayout as plain integers (model/ does not see kv/).
struct KvSlotMap {
  std::vector<int32_t> layer_group;  // [num_layers]; empty = every layer in group 0
  std::vector<int32_t> layer_slot;   // [num_layers]; empty = layer l in slot l
  int32_t num_slots = 0;             // slots per block; 0 = num_layers
};

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int32_t num_blocks, int32_t block_size, kernels::KvDType dtype,
            const KvSlotMap& slots = {});

  // Layer i's view: its slot's K and V tensors, with the layer's window.
  const kernels::KvLayer& layer(int32_t i) const { return layers_[static_cast<size_t>(i)]; }
  // The KV-cache group whose block tables layer i reads (ForwardBatch::attn_of_group).
  int32_t group_of(int32_t i) const { return layer_group_[static_cast<size_t>(i)]; }
  int32_t num_slots() const { return num_slots_; }
  int32_t num_groups() const { return num_groups_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  kernels::KvDType dtype() const { return dtype_; }
  size_t bytes() const { return data_.size(); }

  // Copies block src into block dst in every slot, K and V (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // One block's bytes as one buffer (the disk tier's payload): per slot K then V, then (kQ8) per
  // slot the K then V row scales; block_payload_bytes() long. copy_block_in is the inverse.
  size_t block_payload_bytes() const { return (block_bytes_ + scale_block_bytes_) * 2 * slots_.size(); }
  void copy_block_out(int32_t block, uint8_t* out) const;
  void copy_block_in(int32_t block, const uint8_t* in);

  // Bytes one token's K and V take in one layer: 2 × kv_heads × head_dim × dtype (+ q8 scales).
  static size_t bytes_per_token_per_layer(const ModelConfig& config, kernels::KvDType dtype);
  // ... over all layers (what a token of a full-attention model costs).
  static size_t bytes_per_token(const ModelConfig& config, kernels::KvDType dtype) {
    return bytes_per_token_per_layer(config, dtype) * static_cast<size_t>(config.num_layers);
  }

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  kernels::KvDType dtype_;
  size_t block_bytes_;  // one block of one layer's K (or V)
  size_t scale_block_bytes_ = 0;  // kQ8: one block's row scales of one layer's K (or V); else 0
  int32_t num_slots_;
  int32_t num_groups_ = 1;
  HugeBuffer data_;  // zero-filled: a slot never written reads as 0 (it is never attended to)
  std::vector<kernels::KvLayer> slots_;   // [num_slots] the tensors of each slot
  std::vector<kernels::KvLayer> layers_;  // [num_layers] slots_[slot of l] with layer l's window
  std::vector<int32_t> layer_group_;      // [num_layers]
};

}  // namespace tessera
