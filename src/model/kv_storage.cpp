#include "model/kv_storage.h"

#include <cstring>

namespace tessera {

namespace {
size_t element_bytes(KvDType dtype) { return static_cast<size_t>(kv_element_bytes(dtype)); }
// kQ8: one f32 scale per (token, head) row of K and of V (util/kv_dtype.h).
size_t scale_bytes_per_head_token(KvDType dtype) { return static_cast<size_t>(kv_row_scale_bytes(dtype)); }
}  // namespace

size_t KvStorage::bytes_per_token(const ModelConfig& config, kernels::KvDType dtype) {
  return 2 * static_cast<size_t>(config.num_layers) *
         (static_cast<size_t>(config.kv_dim()) * element_bytes(dtype) +
          static_cast<size_t>(config.num_kv_heads) * scale_bytes_per_head_token(dtype));
}

KvStorage::KvStorage(const ModelConfig& config, int32_t num_blocks, int32_t block_size,
                     kernels::KvDType dtype)
    : num_blocks_(num_blocks), block_size_(block_size), dtype_(dtype) {
  TESSERA_CHECK(num_blocks > 0 && block_size > 0, "KV storage needs blocks ({} x {})", num_blocks, block_size);
  block_bytes_ = static_cast<size_t>(block_size) * static_cast<size_t>(config.kv_dim()) * element_bytes(dtype);
  const size_t tensor_bytes = block_bytes_ * static_cast<size_t>(num_blocks);
  // kQ8 row scales after all the layers' K and V: per layer a K and a V array of
  // [num_blocks][num_kv_heads][block_size] floats (kernels::scale_offset).
  scale_block_bytes_ = static_cast<size_t>(block_size) * static_cast<size_t>(config.num_kv_heads) *
                       scale_bytes_per_head_token(dtype);
  const size_t scale_tensor_bytes = scale_block_bytes_ * static_cast<size_t>(num_blocks);
  const size_t values_bytes = tensor_bytes * 2 * static_cast<size_t>(config.num_layers);
  data_ = HugeBuffer(values_bytes + scale_tensor_bytes * 2 * static_cast<size_t>(config.num_layers));
  layers_.resize(static_cast<size_t>(config.num_layers));
  for (int32_t l = 0; l < config.num_layers; ++l) {
    kernels::KvLayer& layer = layers_[static_cast<size_t>(l)];
    layer.k = data_.data() + tensor_bytes * (2 * static_cast<size_t>(l));
    layer.v = data_.data() + tensor_bytes * (2 * static_cast<size_t>(l) + 1);
    if (dtype == kernels::KvDType::kQ8) {
      uint8_t* scales = data_.data() + values_bytes + scale_tensor_bytes * (2 * static_cast<size_t>(l));
      layer.k_scale = reinterpret_cast<float*>(scales);
      layer.v_scale = reinterpret_cast<float*>(scales + scale_tensor_bytes);
    }
    layer.dtype = dtype;
    layer.num_blocks = num_blocks;
    layer.block_size = block_size;
    layer.num_kv_heads = config.num_kv_heads;
    layer.head_dim = config.head_dim;
    layer.window = config.window_of(l);  // the kernels skip keys before a local layer's window
  }
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  TESSERA_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_, "block {} -> {}", src, dst);
  for (kernels::KvLayer& layer : layers_) {
    for (void* base : {layer.k, layer.v}) {
      auto* bytes = static_cast<uint8_t*>(base);
      std::memcpy(bytes + block_bytes_ * static_cast<size_t>(dst),
                  bytes + block_bytes_ * static_cast<size_t>(src), block_bytes_);
    }
    if (scale_block_bytes_ == 0) continue;
    for (float* base : {layer.k_scale, layer.v_scale}) {
      auto* bytes = reinterpret_cast<uint8_t*>(base);
      std::memcpy(bytes + scale_block_bytes_ * static_cast<size_t>(dst),
                  bytes + scale_block_bytes_ * static_cast<size_t>(src), scale_block_bytes_);
    }
  }
}

}  // namespace tessera
