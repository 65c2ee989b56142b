// KvDType: the element type of the paged KV cache, the one spelling of it from the command line
// (`--kv-dtype f16|f32|q8`, EngineConfig::kv_dtype) down to the attention kernels.
//   kF32, kF16: one K or V element in 4 or 2 bytes.
//   kQ8: int8 values with one f32 scale per (token, KV head) row of K and of V (symmetric:
//        d = amax / 127, read back as float(q) * d; kernels/attention.h quantize_kv_row), so a row
//        of head_dim elements takes head_dim + 4 bytes: about half of f16.
#pragma once
#include <cstdint>
#include <string_view>

#include "util/status.h"

namespace tessera {

enum class KvDType { kF32, kF16, kQ8 };

// "f16" | "f32" | "q8" (the names the flags, EngineConfig and `kv-plan` take); anything else is
// kInvalidArgument naming the choices.
Result<KvDType> parse_kv_dtype(std::string_view name);
const char* kv_dtype_name(KvDType t);

// Bytes of one K or V element (kQ8: the int8; its row scale is counted by kv_row_scale_bytes).
inline int32_t kv_element_bytes(KvDType t) { return t == KvDType::kF32 ? 4 : t == KvDType::kF16 ? 2 : 1; }
// Bytes of the scale that goes with one (token, KV head) row: 4 for kQ8 (one f32), else 0.
inline int32_t kv_row_scale_bytes(KvDType t) { return t == KvDType::kQ8 ? 4 : 0; }
// Bytes of one (token, KV head) row of K or of V, its scale included.
inline int64_t kv_row_bytes(KvDType t, int64_t head_dim) { return head_dim * kv_element_bytes(t) + kv_row_scale_bytes(t); }

}  // namespace tessera
