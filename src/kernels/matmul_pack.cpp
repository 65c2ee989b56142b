// Repacking of 32-block and K-quant weights into the row-interleaved layouts of matmul_pack.h
// (scalar, at load).
#include "kernels/matmul_pack.h"

#include <cstring>

#include "kernels/quant_blocks.h"
#include "util/check.h"

namespace tessera::kernels {
namespace {

// The fields of one GGUF 32-block, wherever the type keeps them.
struct BlockFields {
  uint16_t d = 0, m = 0;
  const uint8_t* qs = nullptr;  // 16 nibble bytes, or 32 int8 for Q8_0
  uint32_t qh = 0;
};

BlockFields fields(DType type, const uint8_t* blk) {
  BlockFields f;
  std::memcpy(&f.d, blk, 2);
  switch (type) {
    case DType::Q4_0: f.qs = reinterpret_cast<const BlockQ4_0*>(blk)->qs; break;
    case DType::Q4_1: f.qs = reinterpret_cast<const BlockQ4_1*>(blk)->qs; std::memcpy(&f.m, blk + 2, 2); break;
    case DType::Q5_0: {
      const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
      f.qs = b->qs, f.qh = load_qh(b->qh);
      break;
    }
    case DType::Q5_1: {
      const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
      f.qs = b->qs, f.qh = load_qh(b->qh);
      std::memcpy(&f.m, blk + 2, 2);
      break;
    }
    case DType::Q8_0: f.qs = reinterpret_cast<const uint8_t*>(reinterpret_cast<const BlockQ8_0*>(blk)->qs); break;
    default: TESSERA_CHECK(false, "pack: {} has no packed layout", dtype_name(type));
  }
  return f;
}

// The 6-bit weight (0..63) of element e of a Q6_K super-block (layout as matmul_ref.cpp reads it).
int q6k_weight(const BlockQ6_K& b, int e) {
  const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
  const uint8_t lbyte = b.ql[64 * half + l + (quarter & 1) * 32];
  const int lo4 = quarter < 2 ? (lbyte & 0xF) : (lbyte >> 4);
  return lo4 | (((b.qh[32 * half + l] >> (2 * quarter)) & 3) << 4);
}

template <DType T>
void pack_kquant_record(const uint8_t* blk, int r, uint8_t* rec) {
  using L = PackedKLayout<T>;
  if constexpr (L::kQ6) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    for (int e = 0; e < kQkK; ++e) {
      const int j = e / 16, k = e % 16 / 4, t = e % 4, w = q6k_weight(*b, e);
      uint8_t* at = rec + 192 * j + 4 * r + t;  // + 64 k': vector k' of sub-block j (see matmul_pack.h)
      if (k < 3) {
        at[64 * k] |= static_cast<uint8_t>(w);
      } else {
        for (int kk = 0; kk < 3; ++kk) at[64 * kk] |= static_cast<uint8_t>(((w >> (2 * kk)) & 3) << 6);
      }
    }
    for (int j = 0; j < 16; ++j) rec[L::kScAt + 16 * j + r] = static_cast<uint8_t>(b->scales[j]);
    std::memcpy(rec + L::kDAt + 2 * r, &b->d, 2);
  } else {
    // Q4_K and Q5_K share d, dmin, scales and qs at the same offsets.
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    const uint8_t* qs = L::kQ5 ? reinterpret_cast<const BlockQ5_K*>(blk)->qs : b->qs;
    for (int c = 0; c < 4; ++c) {
      for (int v = 0; v < 8; ++v) std::memcpy(rec + 512 * c + 64 * v + 4 * r, qs + 32 * c + 4 * v, 4);
    }
    if constexpr (L::kQ5) {
      const uint8_t* qh = reinterpret_cast<const BlockQ5_K*>(blk)->qh;
      for (int j = 0; j < 8; ++j) {
        for (int i = 0; i < 32; ++i) {
          if (((qh[i] >> j) & 1) == 0) continue;
          const int v = i / 4, t = i % 4;
          rec[L::kQhAt + 64 * j + 8 * v + (4 * r + t) / 8] |= static_cast<uint8_t>(1u << ((4 * r + t) % 8));
        }
      }
    }
    for (int j = 0; j < 8; ++j) {
      int sc = 0, mn = 0;
      scale_min_k4(j, b->scales, &sc, &mn);
      rec[L::kScAt + 16 * j + r] = static_cast<uint8_t>(sc);
      rec[L::kMnAt + 16 * j + r] = static_cast<uint8_t>(mn);
    }
    std::memcpy(rec + L::kDAt + 2 * r, &b->d, 2);
    std::memcpy(rec + L::kDminAt + 2 * r, &b->dmin, 2);
  }
}

template <DType T>
void pack_kquant(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / kQkK, groups = (rows + kPackRows - 1) / kPackRows;
  const size_t row_bytes = dtype_row_bytes(T, cols), record = PackedKLayout<T>::kBytes;
  std::memset(dst, 0, static_cast<size_t>(groups * nb) * record);  // padding rows: all zero (d = 0)
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* rec = dst + static_cast<size_t>(g * nb + b) * record;
      for (int64_t r = 0; r < kPackRows && g * kPackRows + r < rows; ++r) {
        const uint8_t* row = src + static_cast<size_t>(g * kPackRows + r) * row_bytes;
        pack_kquant_record<T>(row + static_cast<size_t>(b) * dtype_block_bytes(T), static_cast<int>(r), rec);
      }
    }
  }
}

}  // namespace

bool packable(DType type) {
  return type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 || type == DType::Q5_1 ||
         type == DType::Q8_0 || is_kquant(type);
}

size_t packed_record_bytes(DType type) {
  switch (type) {
    case DType::Q4_K: return PackedKLayout<DType::Q4_K>::kBytes;
    case DType::Q5_K: return PackedKLayout<DType::Q5_K>::kBytes;
    case DType::Q6_K: return PackedKLayout<DType::Q6_K>::kBytes;
    default: return static_cast<size_t>(kPackRows) * dtype_block_bytes(type);
  }
}

size_t packed_bytes(DType type, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * (cols / dtype_block_size(type))) * packed_record_bytes(type);
}

void pack_weights(DType type, const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  TESSERA_CHECK(packable(type) && cols % dtype_block_size(type) == 0, "pack: {} x {} of {}", rows, cols,
                dtype_name(type));
  switch (type) {
    case DType::Q4_K: return pack_kquant<DType::Q4_K>(src, rows, cols, dst);
    case DType::Q5_K: return pack_kquant<DType::Q5_K>(src, rows, cols, dst);
    case DType::Q6_K: return pack_kquant<DType::Q6_K>(src, rows, cols, dst);
    default: break;
  }
  const int64_t nb = cols / kQk, groups = (rows + kPackRows - 1) / kPackRows;
  const size_t block_bytes = dtype_block_bytes(type), row_bytes = dtype_row_bytes(type, cols);
  const size_t record = packed_record_bytes(type);
  const bool q8 = type == DType::Q8_0, q5 = type == DType::Q5_0 || type == DType::Q5_1;
  const bool has_min = type == DType::Q4_1 || type == DType::Q5_1;
  const size_t qs_bytes = q8 ? 512 : 256, qh_bytes = q5 ? 64 : 0;
  std::memset(dst, 0, packed_bytes(type, rows, cols));  // padding rows: all zero (d = 0)
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* rec = dst + static_cast<size_t>(g * nb + b) * record;
      uint64_t qh[8] = {};
      for (int64_t r = 0; r < kPackRows && g * kPackRows + r < rows; ++r) {
        const uint8_t* blk = src + static_cast<size_t>(g * kPackRows + r) * row_bytes + static_cast<size_t>(b) * block_bytes;
        const BlockFields f = fields(type, blk);
        if (q8) {
          for (int q = 0; q < 8; ++q) {
            for (int t = 0; t < 4; ++t) rec[64 * q + 4 * r + t] = static_cast<uint8_t>(f.qs[4 * q + t] + 128);
          }
        } else {
          for (int v = 0; v < 4; ++v) std::memcpy(rec + 64 * v + 4 * r, f.qs + 4 * v, 4);
        }
        for (int v = 0; v < 4 && q5; ++v) {
          for (int h = 0; h < 2; ++h) {
            for (int t = 0; t < 4; ++t) {
              const uint64_t bit = (f.qh >> (16 * h + 4 * v + t)) & 1u;
              qh[2 * v + h] |= bit << (4 * r + t);
            }
          }
        }
        std::memcpy(rec + qs_bytes + qh_bytes + 2 * r, &f.d, 2);
        if (has_min) std::memcpy(rec + qs_bytes + qh_bytes + 32 + 2 * r, &f.m, 2);
      }
      if (q5) std::memcpy(rec + qs_bytes, qh, sizeof(qh));
    }
  }
}

}  // namespace tessera::kernels
