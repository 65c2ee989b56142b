// Tensor element types, numbered as GGUF/ggml number them (the file format's type ids), with the
// block geometry every layer needs to size a tensor: elements per block and bytes per block.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeTraits {
  std::string_view name;
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
};

// nullopt for ids this build does not know (a GGUF with such a tensor is refused by name).
std::optional<DTypeTraits> dtype_traits(uint32_t type_id);
std::optional<DType> dtype_from_name(std::string_view name);  // "Q4_1", "f16", ...
std::string_view dtype_name(DType type);
int64_t dtype_block_size(DType type);
size_t dtype_block_bytes(DType type);

// Bytes of a row of n elements; n must be a multiple of the block size (checked by the caller).
inline size_t dtype_row_bytes(DType type, int64_t n) {
  return static_cast<size_t>(n / dtype_block_size(type)) * dtype_block_bytes(type);
}

}  // namespace tessera
