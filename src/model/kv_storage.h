// KvStorage: the bytes of the paged KV cache, one K and one V tensor per layer, f16 (default),
// f32 or q8 (int8 with per-row scales, kernels::KvDType): V [num_blocks][num_kv_heads][block_size][head_dim], K [num_blocks][num_kv_heads][head_dim]
// [block_size] (head-major, K transposed within a block for the attention's K tiles,
// kernels::KvLayer); a block is one contiguous range of each, which is all copy_block needs. The bookkeeping of
// which block belongs to whom lives in kv/ (integers only); this class only holds the data and
// copies a block when kv/ decides copy-on-write.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "model/model_config.h"
#include "util/huge_buffer.h"

namespace tessera {

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, int32_t num_blocks, int32_t block_size, kernels::KvDType dtype);

  const kernels::KvLayer& layer(int32_t i) const { return layers_[static_cast<size_t>(i)]; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  kernels::KvDType dtype() const { return dtype_; }
  size_t bytes() const { return data_.size(); }

  // Copies block src into block dst in every layer, K and V (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // Bytes one token's K and V take over all layers: 2 × layers × kv_heads × head_dim × dtype.
  static size_t bytes_per_token(const ModelConfig& config, kernels::KvDType dtype);

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  kernels::KvDType dtype_;
  size_t block_bytes_;  // one block of one layer's K (or V)
  size_t scale_block_bytes_ = 0;  // kQ8: one block's row scales of one layer's K (or V); else 0
  HugeBuffer data_;  // zero-filled: a slot never written reads as 0 (it is never attended to)
  std::vector<kernels::KvLayer> layers_;
};

}  // namespace tessera
