// GGUF writer (versions 3 and 2, which share one layout): builds a file in memory (`to_bytes`) or
// on disk (`write`), for tests, fuzz seeds and tools. The reader in gguf.h reads back exactly what
// this writes.
//
// Invariants of the output:
//   - metadata keys appear in first-insertion order; setting a key again replaces its value in place;
//   - tensors appear in insertion order, each at an offset that is a multiple of the alignment, with
//     zero padding between them and after the last one (the file ends on an alignment boundary);
//   - the alignment is `general.alignment` when that key is set (it must then be a uint32 power of
//     two, as the spec says), else 32.
// Values are validated when the file is produced: a Value whose type tag and payload disagree, or
// an array with an item of the wrong type, is a kInvalidArgument error, never a corrupt file.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "util/dtype.h"
#include "util/status.h"

namespace tessera::gguf {

// Value builders, mainly for nested arrays and the less common widths.
Value make_uint_value(ValueType type, uint64_t v);   // type: kUint8/16/32/64
Value make_int_value(ValueType type, int64_t v);     // type: kInt8/16/32/64
Value make_float_value(ValueType type, double v);    // type: kFloat32/kFloat64
Value make_bool_value(bool v);
Value make_string_value(std::string v);
Value make_array_value(ValueType element_type, std::vector<Value> items);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3);  // 2 or 3

  // Scalars.
  void set_uint8(std::string_view key, uint8_t v);
  void set_int8(std::string_view key, int8_t v);
  void set_uint16(std::string_view key, uint16_t v);
  void set_int16(std::string_view key, int16_t v);
  void set_uint32(std::string_view key, uint32_t v);
  void set_int32(std::string_view key, int32_t v);
  void set_uint64(std::string_view key, uint64_t v);
  void set_int64(std::string_view key, int64_t v);
  void set_float32(std::string_view key, float v);
  void set_float64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  // Any value, including nested arrays (checked by to_bytes/write).
  void set_value(std::string_view key, Value v);

  // Arrays of one element type.
  void set_string_array(std::string_view key, std::span<const std::string> v);
  void set_float_array(std::string_view key, std::span<const float> v);
  void set_int32_array(std::string_view key, std::span<const int32_t> v);
  void set_uint32_array(std::string_view key, std::span<const uint32_t> v);
  void set_int64_array(std::string_view key, std::span<const int64_t> v);
  void set_uint8_array(std::string_view key, std::span<const uint8_t> v);
  void set_bool_array(std::string_view key, std::span<const bool> v);

  // Sets `general.alignment` (uint32). TESSERA_CHECKs that it is a power of two.
  void set_alignment(uint32_t alignment);

  // Adds a tensor: dims ne0 first (dims[0] is the contiguous row length), 1 to 4 of them, each
  // positive, dims[0] a multiple of the type's block size, and bytes.size() exactly the tensor's
  // size. kInvalidArgument otherwise, or when the name is empty or already used.
  // add_tensor copies the bytes; add_tensor_ref only keeps the span, and the caller keeps the bytes
  // alive until the last to_bytes()/write().
  Status add_tensor(std::string_view name, const std::vector<int64_t>& dims, DType type,
                    std::span<const uint8_t> bytes);
  Status add_tensor_ref(std::string_view name, const std::vector<int64_t>& dims, DType type,
                        std::span<const uint8_t> bytes);
  Status add_tensor_f32(std::string_view name, const std::vector<int64_t>& dims,
                        std::span<const float> values);  // copies

  uint32_t version() const { return version_; }
  size_t num_metadata() const { return metadata_.size(); }
  size_t num_tensors() const { return tensors_.size(); }

  Result<std::vector<uint8_t>> to_bytes() const;
  // Writes to `path` + ".tmp", then renames, so a failed write never leaves a half file at `path`.
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> dims;       // ne, dims[0] first
    DType type = DType::F32;
    std::vector<uint8_t> owned;      // the copy, when add_tensor copied
    std::span<const uint8_t> ref;    // the caller's bytes, when add_tensor_ref referenced them

    // The data; copies of the writer stay valid because `owned` is never referenced by a span.
    std::span<const uint8_t> bytes() const { return owned.empty() ? ref : std::span(owned); }
  };

  Status check_tensor(std::string_view name, const std::vector<int64_t>& dims, DType type,
                      size_t num_bytes) const;
  Result<uint32_t> alignment() const;
  // Streams the whole file to `sink(data, size)`; returns the first error (of encoding or sink).
  template <typename Sink>
  Status serialize(Sink&& sink) const;

  uint32_t version_;
  std::vector<std::pair<std::string, Value>> metadata_;  // insertion order
  std::vector<PendingTensor> tensors_;                    // insertion order
};

}  // namespace tessera::gguf
