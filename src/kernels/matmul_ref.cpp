// Scalar definition of matmul (see matmul_canon.h for the arithmetic every path shares):
// activation quantization, and the per-element reductions for the three weight families.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tessera::kernels {
namespace {

// One 32-block of weights as integers wq[32] (element order) and its scale and minimum.
void unpack_block32(DType type, const uint8_t* blk, int8_t wq[32], float* dw, float* mw) {
  *mw = 0.0f;
  switch (type) {
    case DType::Q4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
      *dw = fp16_to_fp32(b->d);
      for (int j = 0; j < 16; ++j) {
        wq[j] = static_cast<int8_t>((b->qs[j] & 0xF) - 8);
        wq[j + 16] = static_cast<int8_t>((b->qs[j] >> 4) - 8);
      }
      return;
    }
    case DType::Q4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
      *dw = fp16_to_fp32(b->d);
      *mw = fp16_to_fp32(b->m);
      for (int j = 0; j < 16; ++j) {
        wq[j] = static_cast<int8_t>(b->qs[j] & 0xF);
        wq[j + 16] = static_cast<int8_t>(b->qs[j] >> 4);
      }
      return;
    }
    case DType::Q5_0: {
      const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
      *dw = fp16_to_fp32(b->d);
      const uint32_t qh = load_qh(b->qh);
      for (int j = 0; j < 16; ++j) {
        wq[j] = static_cast<int8_t>(((b->qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - 16);
        wq[j + 16] = static_cast<int8_t>(((b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
      }
      return;
    }
    case DType::Q5_1: {
      const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
      *dw = fp16_to_fp32(b->d);
      *mw = fp16_to_fp32(b->m);
      const uint32_t qh = load_qh(b->qh);
      for (int j = 0; j < 16; ++j) {
        wq[j] = static_cast<int8_t>((b->qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
        wq[j + 16] = static_cast<int8_t>((b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      }
      return;
    }
    case DType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
      *dw = fp16_to_fp32(b->d);
      for (int j = 0; j < 32; ++j) wq[j] = b->qs[j];
      return;
    }
    default: TESSERA_CHECK(false, "unpack_block32: {}", dtype_name(type));
  }
}

float dot_block32(const MatmulArgs& a, const uint8_t* wrow, int64_t i) {
  const int64_t num_blocks = a.cols / kQk;
  const size_t block_bytes = dtype_block_bytes(a.type);
  const int8_t* xq = a.xq + i * a.cols;
  const float* xd = a.xd + i * num_blocks;
  const float* xs = a.xs + i * num_blocks;
  float y = 0.0f;
  for (int64_t b = 0; b < num_blocks; ++b) {
    int8_t wq[32];
    float dw, mw;
    unpack_block32(a.type, wrow + b * block_bytes, wq, &dw, &mw);
    int32_t isum = 0;
    for (int j = 0; j < kQk; ++j) isum += int32_t{wq[j]} * int32_t{xq[b * kQk + j]};
    y = std::fma(static_cast<float>(isum), dw * xd[b], y);
    if (weight_has_min(a.type)) y = std::fma(mw, xs[b], y);
  }
  return y;
}

float dot_float(const MatmulArgs& a, const uint8_t* wrow, int64_t i) {
  const float* x = a.x + i * a.cols;
  float acc[16] = {};
  for (int64_t c = 0; c < a.cols; ++c) {
    float w;
    if (a.type == DType::F32) {
      w = reinterpret_cast<const float*>(wrow)[c];
    } else if (a.type == DType::F16) {
      w = fp16_to_fp32(reinterpret_cast<const uint16_t*>(wrow)[c]);
    } else {
      w = bf16_to_fp32(reinterpret_cast<const uint16_t*>(wrow)[c]);
    }
    acc[c % 16] = std::fma(w, x[c], acc[c % 16]);
  }
  return reduce16(acc);
}

// K-quants: exact integer sums per super-block, then two fmas.
float dot_superblock(const MatmulArgs& a, const uint8_t* wrow, int64_t i) {
  const int64_t num_blocks = a.cols / kQkK;
  const int8_t* xq = a.xq + i * a.cols;
  const float* xd = a.xd + i * num_blocks;
  const int32_t* bsums = a.xbsums + i * (a.cols / 16);
  float y = 0.0f;
  for (int64_t b = 0; b < num_blocks; ++b, xq += kQkK, bsums += 16) {
    int32_t isum = 0, msum = 0;
    float d = 0.0f, dmin = 0.0f;
    if (a.type == DType::Q4_K || a.type == DType::Q5_K) {
      const uint8_t* scales;
      const uint8_t* qs;
      const uint8_t* qh = nullptr;
      if (a.type == DType::Q4_K) {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(wrow) + b;
        d = fp16_to_fp32(blk->d), dmin = fp16_to_fp32(blk->dmin);
        scales = blk->scales, qs = blk->qs;
      } else {
        const auto* blk = reinterpret_cast<const BlockQ5_K*>(wrow) + b;
        d = fp16_to_fp32(blk->d), dmin = fp16_to_fp32(blk->dmin);
        scales = blk->scales, qs = blk->qs, qh = blk->qh;
      }
      for (int j = 0; j < 8; ++j) {  // sub-block j: elements 32j..32j+31
        int sc, mn;
        scale_min_k4(j, scales, &sc, &mn);
        const int c = j / 2, shift = (j & 1) * 4;
        int32_t dot = 0;
        for (int l = 0; l < 32; ++l) {
          int q = (qs[32 * c + l] >> shift) & 0xF;
          if (qh) q += ((qh[l] >> j) & 1) << 4;
          dot += q * int32_t{xq[32 * j + l]};
        }
        isum += sc * dot;
        msum += mn * (bsums[2 * j] + bsums[2 * j + 1]);
      }
    } else {  // Q6_K: 16 sub-blocks of 16, value (q - 32) * scale
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(wrow) + b;
      d = fp16_to_fp32(blk->d);
      for (int e = 0; e < kQkK; ++e) {
        const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const uint8_t* ql = blk->ql + 64 * half;
        const uint8_t* qh = blk->qh + 32 * half;
        const uint8_t lbyte = ql[l + (quarter & 1) * 32];
        const int lo4 = quarter < 2 ? (lbyte & 0xF) : (lbyte >> 4);
        const int hi2 = (qh[l] >> (2 * quarter)) & 3;
        const int q = (lo4 | (hi2 << 4)) - 32;
        isum += int32_t{blk->scales[e / 16]} * q * int32_t{xq[e]};
      }
    }
    y = std::fma(static_cast<float>(isum), d * xd[b], y);
    y = std::fma(-static_cast<float>(msum), dmin * xd[b], y);
  }
  return y;
}

}  // namespace

void quantize_activations(DType type, const float* x, int64_t m, int64_t cols, int8_t* xq,
                          float* xd, float* xs, int32_t* xsum, int32_t* xbsums) {
  const WeightFamily family = weight_family(type);
  if (family == WeightFamily::kFloat) return;
  const int64_t block = family == WeightFamily::kBlock32 ? kQk : kQkK;
  const int64_t num_blocks = m * (cols / block);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = xq + b * block;
    float amax = 0.0f;
    for (int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t j = 0; j < block; ++j) {
      const int q = static_cast<int>(std::nearbyint(xb[j] * id));
      qb[j] = static_cast<int8_t>(q);
      sum += q;
    }
    const float d = amax / 127.0f;
    xd[b] = d;
    if (family == WeightFamily::kBlock32) {
      xs[b] = d * static_cast<float>(sum);
      xsum[b] = sum;
    } else {
      for (int g = 0; g < kQkK / 16; ++g) {
        int32_t s = 0;
        for (int j = 0; j < 16; ++j) s += qb[16 * g + j];
        xbsums[b * 16 + g] = s;
      }
    }
  }
}

void matmul_rows_ref(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  const WeightFamily family = weight_family(a.type);
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.row_bytes;
    for (int64_t i = 0; i < a.m; ++i) {
      float v;
      if (family == WeightFamily::kFloat) {
        v = dot_float(a, wrow, i);
      } else if (family == WeightFamily::kBlock32) {
        v = dot_block32(a, wrow, i);
      } else {
        v = dot_superblock(a, wrow, i);
      }
      a.y[i * a.rows + r] = v;
    }
  }
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t m, float* y) {
  const int64_t cols = w.cols();
  std::vector<int8_t> xq(static_cast<size_t>(m * cols));
  std::vector<float> xd(static_cast<size_t>(m * cols / kQk) + 1), xs(xd.size());
  std::vector<int32_t> xsum(xd.size()), xbsums(static_cast<size_t>(m * cols / 16) + 1);
  quantize_activations(w.type(), x, m, cols, xq.data(), xd.data(), xs.data(), xsum.data(), xbsums.data());
  MatmulArgs a;
  a.type = w.type();
  a.w = w.data();
  a.row_bytes = w.row_bytes();
  a.rows = w.rows();
  a.cols = cols;
  a.m = m;
  a.x = x;
  a.xq = xq.data();
  a.xd = xd.data();
  a.xs = xs.data();
  a.xsum = xsum.data();
  a.xbsums = xbsums.data();
  a.y = y;
  matmul_rows_ref(a, 0, w.rows());
}

}  // namespace tessera::kernels
