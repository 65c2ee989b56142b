// Repacking of 32-block weights into the row-interleaved layout of matmul_pack.h (scalar, at load).
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

}  // namespace

bool packable(DType type) {
  return type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 || type == DType::Q5_1 ||
         type == DType::Q8_0;
}

size_t packed_record_bytes(DType type) { return static_cast<size_t>(kPackRows) * dtype_block_bytes(type); }

size_t packed_bytes(DType type, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * (cols / kQk)) * packed_record_bytes(type);
}

void pack_weights(DType type, const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  TESSERA_CHECK(packable(type) && cols % kQk == 0, "pack: {} x {} of {}", rows, cols, dtype_name(type));
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
