#include "util/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "util/check.h"

namespace tessera {
namespace {

struct Entry {
  DType type;
  DTypeTraits traits;
};

// Block sizes and bytes as in the GGUF specification's type table.
constexpr std::array kTypes = {
    Entry{DType::F32, {"F32", 1, 4}},
    Entry{DType::F16, {"F16", 1, 2}},
    Entry{DType::Q4_0, {"Q4_0", 32, 2 + 16}},
    Entry{DType::Q4_1, {"Q4_1", 32, 2 + 2 + 16}},
    Entry{DType::Q5_0, {"Q5_0", 32, 2 + 4 + 16}},
    Entry{DType::Q5_1, {"Q5_1", 32, 2 + 2 + 4 + 16}},
    Entry{DType::Q8_0, {"Q8_0", 32, 2 + 32}},
    Entry{DType::Q8_1, {"Q8_1", 32, 4 + 32}},
    Entry{DType::Q2_K, {"Q2_K", 256, 256 / 16 + 256 / 4 + 2 + 2}},
    Entry{DType::Q3_K, {"Q3_K", 256, 256 / 8 + 256 / 4 + 12 + 2}},
    Entry{DType::Q4_K, {"Q4_K", 256, 2 + 2 + 12 + 256 / 2}},
    Entry{DType::Q5_K, {"Q5_K", 256, 2 + 2 + 12 + 256 / 8 + 256 / 2}},
    Entry{DType::Q6_K, {"Q6_K", 256, 256 / 2 + 256 / 4 + 256 / 16 + 2}},
    Entry{DType::Q8_K, {"Q8_K", 256, 4 + 256 + 16 * 2}},
    Entry{DType::I8, {"I8", 1, 1}},
    Entry{DType::I16, {"I16", 1, 2}},
    Entry{DType::I32, {"I32", 1, 4}},
    Entry{DType::I64, {"I64", 1, 8}},
    Entry{DType::F64, {"F64", 1, 8}},
    Entry{DType::BF16, {"BF16", 1, 2}},
};

const Entry* find(DType type) {
  for (const Entry& e : kTypes) {
    if (e.type == type) return &e;
  }
  return nullptr;
}

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t type_id) {
  const Entry* e = find(static_cast<DType>(type_id));
  if (!e) return std::nullopt;
  return e->traits;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Entry& e : kTypes) {
    if (e.traits.name == upper) return e.type;
  }
  return std::nullopt;
}

std::string_view dtype_name(DType type) {
  const Entry* e = find(type);
  return e ? e->traits.name : std::string_view("unknown");
}

int64_t dtype_block_size(DType type) {
  const Entry* e = find(type);
  TESSERA_CHECK(e != nullptr, "unknown dtype {}", static_cast<uint32_t>(type));
  return e->traits.block_size;
}

size_t dtype_block_bytes(DType type) {
  const Entry* e = find(type);
  TESSERA_CHECK(e != nullptr, "unknown dtype {}", static_cast<uint32_t>(type));
  return e->traits.block_bytes;
}

}  // namespace tessera
