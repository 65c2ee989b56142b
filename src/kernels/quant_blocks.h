// The block layouts of the ggml/GGUF weight types, byte for byte as stored in a file
// (little-endian; fp16 fields as raw IEEE half bits). Within a 32-block of Q4_x/Q5_x, byte j of
// qs holds element j in its low nibble and element j + 16 in its high nibble; for Q5_x, bit j of
// the 32-bit qh is element j's fifth bit.
#pragma once
#include <cstdint>

namespace tessera::kernels {

constexpr int kQk = 32;    // elements per block of the simple types
constexpr int kQkK = 256;  // elements per super-block of the K-quants

struct BlockQ4_0 {
  uint16_t d;            // fp16 scale; value = (q - 8) * d
  uint8_t qs[kQk / 2];   // [16] nibbles
};
struct BlockQ4_1 {
  uint16_t d;            // fp16 scale; value = q * d + m
  uint16_t m;            // fp16 minimum
  uint8_t qs[kQk / 2];   // [16] nibbles
};
struct BlockQ5_0 {
  uint16_t d;            // fp16 scale; value = (q - 16) * d
  uint8_t qh[4];         // 32 fifth bits, little-endian uint32
  uint8_t qs[kQk / 2];   // [16] low nibbles
};
struct BlockQ5_1 {
  uint16_t d;            // fp16 scale; value = q * d + m
  uint16_t m;            // fp16 minimum
  uint8_t qh[4];         // 32 fifth bits
  uint8_t qs[kQk / 2];   // [16] low nibbles
};
struct BlockQ8_0 {
  uint16_t d;            // fp16 scale; value = q * d
  int8_t qs[kQk];        // [32]
};
// K-quants: 8 sub-blocks of 32 (Q4_K, Q5_K) with 6-bit scales and mins packed in 12 bytes
// (see scale_min_k4), or 16 sub-blocks of 16 with int8 scales (Q6_K).
struct BlockQ4_K {
  uint16_t d;             // fp16 super-scale of the sub-block scales
  uint16_t dmin;          // fp16 super-scale of the sub-block mins
  uint8_t scales[12];     // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[kQkK / 2];   // [128] nibbles: 64-element chunk c uses bytes 32c..32c+31, low then high
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];   // [32] fifth bits: element 64c+l uses bit 2c of qh[l], 64c+32+l bit 2c+1
  uint8_t qs[kQkK / 2];   // [128] low nibbles, as Q4_K
};
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];   // [128] low 4 bits
  uint8_t qh[kQkK / 4];   // [64] high 2 bits
  int8_t scales[kQkK / 16];  // [16] sub-block scales
  uint16_t d;             // fp16 super-scale; value = d * scale * (q - 32)
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Sub-block j (0..7) of a Q4_K/Q5_K super-block: its 6-bit scale and min.
inline void scale_min_k4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q5_x fifth bits as one little-endian word.
inline uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
         (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
}

}  // namespace tessera::kernels
