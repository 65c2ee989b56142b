#include "model/kv_storage.h"

#include <algorithm>
#include <cstring>

namespace tessera {

namespace {
size_t element_bytes(KvDType dtype) { return static_cast<size_t>(kv_element_bytes(dtype)); }
// kQ8: one f32 scale per (token, head) row of K and of V (util/kv_dtype.h).
size_t scale_bytes_per_head_token(KvDType dtype) { return static_cast<size_t>(kv_row_scale_bytes(dtype)); }
}  // namespace

size_t KvStorage::bytes_per_token_per_layer(const ModelConfig& config, kernels::KvDType dtype) {
  return 2 * (static_cast<size_t>(config.kv_dim()) * element_bytes(dtype) +
              static_cast<size_t>(config.num_kv_heads) * scale_bytes_per_head_token(dtype));
}

KvStorage::KvStorage(const ModelConfig& config, int32_t num_blocks, int32_t block_size,
                     kernels::KvDType dtype, const KvSlotMap& slots)
    : num_blocks_(num_blocks), block_size_(block_size), dtype_(dtype),
      num_slots_(slots.num_slots > 0 ? slots.num_slots : config.num_layers) {
  TESSERA_CHECK(num_blocks > 0 && block_size > 0, "KV storage needs blocks ({} x {})", num_blocks, block_size);
  const auto num_layers = static_cast<size_t>(config.num_layers);
  TESSERA_CHECK((slots.layer_slot.empty() || slots.layer_slot.size() == num_layers) &&
                    (slots.layer_group.empty() || slots.layer_group.size() == num_layers),
                "KV slot map for {} layers has {} slots and {} groups", num_layers, slots.layer_slot.size(),
                slots.layer_group.size());
  block_bytes_ = static_cast<size_t>(block_size) * static_cast<size_t>(config.kv_dim()) * element_bytes(dtype);
  const size_t tensor_bytes = block_bytes_ * static_cast<size_t>(num_blocks);
  // kQ8 row scales after all the slots' K and V: per slot a K and a V array of
  // [num_blocks][num_kv_heads][block_size] floats (kernels::scale_offset).
  scale_block_bytes_ = static_cast<size_t>(block_size) * static_cast<size_t>(config.num_kv_heads) *
                       scale_bytes_per_head_token(dtype);
  const size_t scale_tensor_bytes = scale_block_bytes_ * static_cast<size_t>(num_blocks);
  const auto num_slots = static_cast<size_t>(num_slots_);
  const size_t values_bytes = tensor_bytes * 2 * num_slots;
  data_ = HugeBuffer(values_bytes + scale_tensor_bytes * 2 * num_slots);
  slots_.resize(num_slots);
  for (size_t s = 0; s < num_slots; ++s) {
    kernels::KvLayer& slot = slots_[s];
    slot.k = data_.data() + tensor_bytes * (2 * s);
    slot.v = data_.data() + tensor_bytes * (2 * s + 1);
    if (dtype == kernels::KvDType::kQ8) {
      uint8_t* scales = data_.data() + values_bytes + scale_tensor_bytes * (2 * s);
      slot.k_scale = reinterpret_cast<float*>(scales);
      slot.v_scale = reinterpret_cast<float*>(scales + scale_tensor_bytes);
    }
    slot.dtype = dtype;
    slot.num_blocks = num_blocks;
    slot.block_size = block_size;
    slot.num_kv_heads = config.num_kv_heads;
    slot.head_dim = config.head_dim;
  }
  layers_.resize(num_layers);
  layer_group_.resize(num_layers);
  for (size_t l = 0; l < num_layers; ++l) {
    const size_t slot = slots.layer_slot.empty() ? l : static_cast<size_t>(slots.layer_slot[l]);
    TESSERA_CHECK(slot < num_slots, "layer {} in slot {} of {}", l, slot, num_slots);
    layers_[l] = slots_[slot];
    layers_[l].window = config.window_of(static_cast<int32_t>(l));  // the kernels skip keys before it
    layer_group_[l] = slots.layer_group.empty() ? 0 : slots.layer_group[l];
    TESSERA_CHECK(layer_group_[l] >= 0, "layer {} in group {}", l, layer_group_[l]);
    num_groups_ = std::max(num_groups_, layer_group_[l] + 1);
  }
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  TESSERA_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_, "block {} -> {}", src, dst);
  for (kernels::KvLayer& slot : slots_) {
    for (void* base : {slot.k, slot.v}) {
      auto* bytes = static_cast<uint8_t*>(base);
      std::memcpy(bytes + block_bytes_ * static_cast<size_t>(dst),
                  bytes + block_bytes_ * static_cast<size_t>(src), block_bytes_);
    }
    if (scale_block_bytes_ == 0) continue;
    for (float* base : {slot.k_scale, slot.v_scale}) {
      auto* bytes = reinterpret_cast<uint8_t*>(base);
      std::memcpy(bytes + scale_block_bytes_ * static_cast<size_t>(dst),
                  bytes + scale_block_bytes_ * static_cast<size_t>(src), scale_block_bytes_);
    }
  }
}

}  // namespace tessera

namespace tessera {

namespace {
// Every byte range of one block, in payload order: per slot K, V; then (kQ8) per slot K, V scales.
template <typename Fn>
void for_each_block_range(const std::vector<kernels::KvLayer>& slots, size_t block_bytes, size_t scale_block_bytes,
                          int32_t block, Fn fn) {
  for (const kernels::KvLayer& slot : slots) {
    for (void* base : {slot.k, slot.v}) fn(static_cast<uint8_t*>(base) + block_bytes * static_cast<size_t>(block), block_bytes);
  }
  if (scale_block_bytes == 0) return;
  for (const kernels::KvLayer& slot : slots) {
    for (float* base : {slot.k_scale, slot.v_scale}) {
      fn(reinterpret_cast<uint8_t*>(base) + scale_block_bytes * static_cast<size_t>(block), scale_block_bytes);
    }
  }
}
}  // namespace

void KvStorage::copy_block_out(int32_t block, uint8_t* out) const {
  TESSERA_CHECK(block > 0 && block < num_blocks_, "block {}", block);
  for_each_block_range(slots_, block_bytes_, scale_block_bytes_, block, [&](const uint8_t* p, size_t n) {
    std::memcpy(out, p, n);
    out += n;
  });
}

void KvStorage::copy_block_in(int32_t block, const uint8_t* in) {
  TESSERA_CHECK(block > 0 && block < num_blocks_, "block {}", block);
  for_each_block_range(slots_, block_bytes_, scale_block_bytes_, block, [&](uint8_t* p, size_t n) {
    std::memcpy(p, in, n);
    in += n;
  });
}

}  // namespace tessera
