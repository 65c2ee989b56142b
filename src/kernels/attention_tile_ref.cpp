// Scalar tile kernels of the flash attention (the readable path and the TESSERA_FORCE_SCALAR one).
// Plain loops in the order the header states; no fused multiply-add (baseline x86-64 has none).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_internal.h"
#include "util/fp16.h"

namespace tessera::kernels::attn_detail {
namespace {


void load_tile_ref(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                   int32_t n, PrefetchStream* /*next: no prefetching here*/, float* kt, float* vt,
                   const float** v_rows) {
  const int32_t hd = kv.head_dim;
  for (int32_t j = 0; j < n; ++j) {
    const int32_t pos = key_begin + j;
    const int64_t off = v_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head);
    const int64_t k_off = k_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head);
    if (kv.dtype == KvDType::kF32) {
      const float* k = static_cast<const float*>(kv.k) + k_off;
      for (int32_t d = 0; d < hd; ++d) kt[d * kTileKeys + j] = k[int64_t{d} * kv.block_size];
      v_rows[j] = static_cast<const float*>(kv.v) + off;
    } else if (kv.dtype == KvDType::kQ8) {
      const int64_t s = scale_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head);
      const int8_t* k = static_cast<const int8_t*>(kv.k) + k_off;
      const int8_t* v = static_cast<const int8_t*>(kv.v) + off;
      for (int32_t d = 0; d < hd; ++d) kt[d * kTileKeys + j] = static_cast<float>(k[int64_t{d} * kv.block_size]) * kv.k_scale[s];
      for (int32_t d = 0; d < hd; ++d) vt[j * hd + d] = static_cast<float>(v[d]) * kv.v_scale[s];
      v_rows[j] = vt + j * hd;
    } else {
      const uint16_t* k = static_cast<const uint16_t*>(kv.k) + k_off;
      const uint16_t* v = static_cast<const uint16_t*>(kv.v) + off;
      for (int32_t d = 0; d < hd; ++d) kt[d * kTileKeys + j] = fp16_to_fp32(k[int64_t{d} * kv.block_size]);
      for (int32_t d = 0; d < hd; ++d) vt[j * hd + d] = fp16_to_fp32(v[d]);
      v_rows[j] = vt + j * hd;
    }
  }
  for (int32_t d = 0; d < hd; ++d) {
    for (int32_t j = n; j < kTileKeys; ++j) kt[d * kTileKeys + j] = 0.0f;
  }
}

void scores_ref(const float* const* q_rows, int32_t num_rows, const float* kt, int32_t head_dim,
                float scale, float* s) {
  for (int32_t r = 0; r < num_rows; ++r) {
    float acc[kTileKeys] = {};
    const float* q = q_rows[r];
    for (int32_t d = 0; d < head_dim; ++d) {
      const float qd = q[d];
      const float* k = kt + d * kTileKeys;
      for (int32_t j = 0; j < kTileKeys; ++j) acc[j] += qd * k[j];
    }
    for (int32_t j = 0; j < kTileKeys; ++j) s[r * kTileKeys + j] = acc[j] * scale;
  }
}

void update_ref(const float* s, int32_t n, const float* const* v_rows, int32_t head_dim,
                float* state) {
  float* acc = state;
  float& m = state[head_dim];
  float& l = state[head_dim + 1];
  float tile_max = s[0];
  for (int32_t j = 1; j < n; ++j) tile_max = std::max(tile_max, s[j]);
  const float m_new = std::max(m, tile_max);
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - m_new);
  float sum = 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) acc[d] *= alpha;
  for (int32_t j = 0; j < n; ++j) {
    const float p = std::exp(s[j] - m_new);
    sum += p;
    const float* v = v_rows[j];
    for (int32_t d = 0; d < head_dim; ++d) acc[d] += p * v[d];
  }
  l = l * alpha + sum;
  m = m_new;
}

const TileKernels kRef = {load_tile_ref, scores_ref, update_ref};

}  // namespace

const TileKernels& tile_kernels_ref() { return kRef; }

}  // namespace tessera::kernels::attn_detail
