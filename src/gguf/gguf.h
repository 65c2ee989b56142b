// GGUF reader (versions 2 and 3), over a memory-mapped file. A GGUF file is hostile input: every
// count, length, offset and size is checked against the file before it is used, so a corrupt file
// yields an Error naming what is wrong, never a crash or an out-of-bounds read.
//
// File layout (little-endian):
//   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count × (string key, u32 value_type, value)         string = u64 length + bytes
//   tensor_count × (string name, u32 n_dims, n_dims × u64 ne, u32 type, u64 offset)
//   padding to `general.alignment` (default 32) | tensor data (offsets relative to here)
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "util/dtype.h"
#include "util/mmap_file.h"
#include "util/status.h"

namespace tessera::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
std::string_view value_type_name(ValueType type);

struct Value;
struct ArrayValue {
  ValueType element_type = ValueType::kUint8;
  std::vector<Value> items;
};

// One metadata value. Integers keep their signedness class; the exact stored width is `type`.
struct Value {
  ValueType type = ValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, ArrayValue> data;
};

constexpr int kMaxDims = 4;
constexpr uint32_t kDefaultAlignment = 32;

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;   // ne: dims[0] is the contiguous (row) length, as ggml orders them
  DType type = DType::F32;
  uint64_t offset = 0;         // bytes from the start of the data section
  size_t num_bytes = 0;        // exact size of the data
  int64_t num_elements = 0;
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives

  int64_t rows() const;  // product of dims[1..]: a 2-D weight [rows][dims[0]]
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // Parses an already mapped (or in-memory) file; takes ownership of the mapping.
  static Result<GgufFile> parse(MappedFile file);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return file_.path(); }
  size_t file_size() const { return file_.size(); }
  std::span<const uint8_t> bytes() const { return file_.bytes(); }  // the whole file (content fingerprints)

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: an Error names the key and what was found when it is missing or mistyped.
  // Integer getters accept any integer type whose value fits.
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;  // accepts f32/f64 and integers
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;

  friend class Parser;
};

}  // namespace tessera::gguf
