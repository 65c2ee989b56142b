// write_kv and the naive attention twin: per sequence and query head, the whole score matrix
// S[i][j] = scale * q_i . k_j (j <= position of row i, and inside the row's window if any), a softmax per row, then S V. Readable,
// single-threaded, O(q_len * seq_len) scratch: the oracle the flash kernel is tested against.
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tessera::kernels {
namespace {

// Value row `pos` of kv_head as f32 (converted into `tmp` for an f16 cache).
const float* v_row(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t pos, float* tmp) {
  const int64_t off = v_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head);
  if (kv.dtype == KvDType::kF32) return static_cast<const float*>(kv.v) + off;
  if (kv.dtype == KvDType::kQ8) {
    const int8_t* q = static_cast<const int8_t*>(kv.v) + off;
    const float d = kv.v_scale[scale_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head)];
    for (int32_t i = 0; i < kv.head_dim; ++i) tmp[i] = static_cast<float>(q[i]) * d;
    return tmp;
  }
  const uint16_t* h = static_cast<const uint16_t*>(kv.v) + off;
  for (int32_t d = 0; d < kv.head_dim; ++d) tmp[d] = fp16_to_fp32(h[d]);
  return tmp;
}

// Key `pos` of kv_head gathered into `tmp` as f32 (K is stored transposed within a block).
const float* k_row(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t pos, float* tmp) {
  const int64_t off = k_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head);
  const float scale = kv.dtype == KvDType::kQ8
                          ? kv.k_scale[scale_offset(kv, blocks[pos / kv.block_size], pos % kv.block_size, kv_head)]
                          : 0.0f;
  for (int32_t d = 0; d < kv.head_dim; ++d) {
    const int64_t e = off + int64_t{d} * kv.block_size;
    switch (kv.dtype) {
      case KvDType::kF32: tmp[d] = static_cast<const float*>(kv.k)[e]; break;
      case KvDType::kF16: tmp[d] = fp16_to_fp32(static_cast<const uint16_t*>(kv.k)[e]); break;
      case KvDType::kQ8: tmp[d] = static_cast<float>(static_cast<const int8_t*>(kv.k)[e]) * scale; break;
    }
  }
  return tmp;
}

// Eight running sums, so the compiler may vectorize without reordering any one of them.
float dot(const float* a, const float* b, int32_t n) {
  float lanes[8] = {};
  int32_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += a[d + l] * b[d + l];
  }
  for (; d < n; ++d) lanes[0] += a[d] * b[d];
  float sum = 0.0f;
  for (float x : lanes) sum += x;
  return sum;
}

}  // namespace

void write_kv_head(const KvLayer& kv, int64_t slot, int32_t h, const float* kh, const float* vh) {
  constexpr int32_t kMaxHeadDim = 1024;
  TESSERA_CHECK(kv.head_dim <= kMaxHeadDim, "head_dim {} too large", kv.head_dim);
  TESSERA_CHECK(slot >= 0 && slot < int64_t{kv.num_blocks} * kv.block_size, "slot {} out of {} slots", slot,
                int64_t{kv.num_blocks} * kv.block_size);
  TESSERA_CHECK(h >= 0 && h < kv.num_kv_heads, "kv head {} of {}", h, kv.num_kv_heads);
  const int64_t block = slot / kv.block_size;
  const auto in_block = static_cast<int32_t>(slot % kv.block_size);
  const int64_t v_off = v_offset(kv, block, in_block, h);  // V: one contiguous row per head
  if (kv.dtype == KvDType::kF32) {
    std::copy(vh, vh + kv.head_dim, static_cast<float*>(kv.v) + v_off);
  } else if (kv.dtype == KvDType::kQ8) {
    kv.v_scale[scale_offset(kv, block, in_block, h)] =
        quantize_kv_row(vh, kv.head_dim, static_cast<int8_t*>(kv.v) + v_off);
  } else {
    fp32_to_fp16_row(vh, static_cast<uint16_t*>(kv.v) + v_off, kv.head_dim);
  }
  const int64_t k_off = k_offset(kv, block, in_block, h);  // K: dimension d at stride block_size
  if (kv.dtype == KvDType::kF32) {
    for (int32_t d = 0; d < kv.head_dim; ++d) static_cast<float*>(kv.k)[k_off + int64_t{d} * kv.block_size] = kh[d];
  } else if (kv.dtype == KvDType::kQ8) {
    int8_t q[kMaxHeadDim];  // the head's K row, before its scatter
    kv.k_scale[scale_offset(kv, block, in_block, h)] = quantize_kv_row(kh, kv.head_dim, q);
    int8_t* kd = static_cast<int8_t*>(kv.k) + k_off;
    for (int32_t d = 0; d < kv.head_dim; ++d) kd[int64_t{d} * kv.block_size] = q[d];
  } else {
    uint16_t k_half[kMaxHeadDim];  // the head's K row in f16, before its scatter
    fp32_to_fp16_row(kh, k_half, kv.head_dim);
    uint16_t* kd = static_cast<uint16_t*>(kv.k) + k_off;
    for (int32_t d = 0; d < kv.head_dim; ++d) kd[int64_t{d} * kv.block_size] = k_half[d];
  }
}

void write_kv(const KvLayer& kv, const AttnMetadata& md, const float* k, const float* v, int32_t t_begin,
              int32_t t_end) {
  const int64_t row = int64_t{kv.num_kv_heads} * kv.head_dim;
  if (t_end < 0) t_end = md.num_tokens;
  TESSERA_CHECK(t_begin >= 0 && t_end <= md.num_tokens, "write_kv: tokens [{}, {}) of {}", t_begin, t_end, md.num_tokens);
  for (int32_t t = t_begin; t < t_end; ++t) {
    const int64_t slot = md.slot_mapping[t];
    if (slot < 0) continue;
    for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
      write_kv_head(kv, slot, h, k + t * row + int64_t{h} * kv.head_dim, v + t * row + int64_t{h} * kv.head_dim);
    }
  }
}

void paged_attention_naive(const KvLayer& kv, const AttnMetadata& md, const float* q,
                           int32_t num_heads, float scale, float* out, AttnWorkspace& ws) {
  TESSERA_CHECK(kv.num_kv_heads > 0 && num_heads % kv.num_kv_heads == 0, "bad head counts");
  const int32_t hd = kv.head_dim;
  const int32_t group = num_heads / kv.num_kv_heads;
  float k_tmp[1024];
  float v_tmp[1024];
  TESSERA_CHECK(hd <= 1024, "head_dim {} too large", hd);
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const int32_t q_begin = md.query_start_loc[s];
    const int32_t q_len = md.query_start_loc[s + 1] - q_begin;
    const int32_t seq_len = md.seq_lens[s];
    const int32_t first_pos = seq_len - q_len;
    const int32_t* blocks = md.block_table_indices + md.block_table_indptr[s];
    if (q_len == 0) continue;
    // scores: [q_len][seq_len], one head at a time.
    float* scores = ws.ensure_naive(size_t(q_len) * seq_len);
    ws.note_naive(sizeof(float) * size_t(q_len) * seq_len);
    for (int32_t h = 0; h < num_heads; ++h) {
      const int32_t kv_head = h / group;
      // S = scale * Q K^T, causal (and within the window: keys [first_visible_key, p]).
      for (int32_t i = 0; i < q_len; ++i) {
        const float* qi = q + (int64_t{q_begin + i} * num_heads + h) * hd;
        float* row = scores + int64_t{i} * seq_len;
        for (int32_t j = first_visible_key(kv, first_pos + i); j <= first_pos + i; ++j) {
          row[j] = scale * dot(qi, k_row(kv, blocks, kv_head, j, k_tmp), hd);
        }
      }
      // softmax per row over its keys [lo, first_pos + i].
      for (int32_t i = 0; i < q_len; ++i) {
        float* row = scores + int64_t{i} * seq_len;
        const int32_t lo = first_visible_key(kv, first_pos + i);
        const int32_t n = first_pos + i + 1;
        const float m = *std::max_element(row + lo, row + n);
        float sum = 0.0f;
        for (int32_t j = lo; j < n; ++j) {
          row[j] = std::exp(row[j] - m);
          sum += row[j];
        }
        for (int32_t j = lo; j < n; ++j) row[j] /= sum;
      }
      // O = P V.
      for (int32_t i = 0; i < q_len; ++i) {
        float* o = out + (int64_t{q_begin + i} * num_heads + h) * hd;
        const float* row = scores + int64_t{i} * seq_len;
        std::fill(o, o + hd, 0.0f);
        for (int32_t j = first_visible_key(kv, first_pos + i); j <= first_pos + i; ++j) {
          const float* vj = v_row(kv, blocks, kv_head, j, v_tmp);
          for (int32_t d = 0; d < hd; ++d) o[d] += row[j] * vj[d];
        }
      }
    }
  }
}

}  // namespace tessera::kernels
