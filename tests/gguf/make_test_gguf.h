// Header-only helpers for tests that build small GGUF files: parse bytes in memory, find and patch
// fields of a written file, hand-assemble bytes, walk every value and tensor of a parsed file (as
// the fuzzer does), and the small valid files that the corrupt-file tests damage and that seed the
// fuzz corpus (fuzz/corpus/, checked byte for byte by test_gguf_writer).
// No GoogleTest here, so fuzz/ can include it too.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "util/check.h"

namespace tessera::gguf::testing {

// Parses bytes in place; the bytes must outlive the returned file.
inline Result<GgufFile> parse_bytes(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(MappedFile::from_memory(bytes.data(), bytes.size()));
}

// Offset of the first occurrence of `needle` (which must occur).
inline size_t find_bytes(const std::vector<uint8_t>& bytes, std::string_view needle) {
  const std::string_view hay(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t at = hay.find(needle);
  TESSERA_CHECK(at != std::string_view::npos, "'{}' not found in the test file", needle);
  return at;
}

template <typename T>
void poke(std::vector<uint8_t>& bytes, size_t at, T v) {
  TESSERA_CHECK(at + sizeof(T) <= bytes.size(), "poke at {} past the end {}", at, bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

template <typename T>
T peek(const std::vector<uint8_t>& bytes, size_t at) {
  TESSERA_CHECK(at + sizeof(T) <= bytes.size(), "peek at {} past the end {}", at, bytes.size());
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

// Field offsets of a metadata entry in a written file, found by its (unique) key text.
struct KvAt {
  size_t type;   // u32 value type
  size_t value;  // first byte of the value
};
inline KvAt kv_at(const std::vector<uint8_t>& bytes, std::string_view key) {
  const size_t type = find_bytes(bytes, key) + key.size();
  return {type, type + 4};
}

// Field offsets of a tensor info in a written file, found by its (unique) name text.
struct TensorInfoAt {
  size_t n_dims;  // u32
  size_t dims;    // n_dims × u64
  size_t type;    // u32
  size_t offset;  // u64
};
inline TensorInfoAt tensor_info_at(const std::vector<uint8_t>& bytes, std::string_view name) {
  TensorInfoAt at{};
  at.n_dims = find_bytes(bytes, name) + name.size();
  at.dims = at.n_dims + 4;
  at.type = at.dims + 8 * peek<uint32_t>(bytes, at.n_dims);
  at.offset = at.type + 4;
  return at;
}

// Hand assembly of GGUF bytes, little-endian.
struct ByteBuilder {
  std::vector<uint8_t> bytes;

  ByteBuilder& raw(std::string_view s) {
    // NOTE(gguf): resize + memcpy, not insert(): GCC 12 -Wstringop-overflow misfires on insert()
    // into an empty vector at -O3.
    const size_t at = bytes.size();
    bytes.resize(at + s.size());
    if (!s.empty()) std::memcpy(bytes.data() + at, s.data(), s.size());
    return *this;
  }
  template <typename T>
  ByteBuilder& put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  ByteBuilder& u8(uint8_t v) { return put(v); }
  ByteBuilder& u32(uint32_t v) { return put(v); }
  ByteBuilder& u64(uint64_t v) { return put(v); }
  ByteBuilder& str(std::string_view s) { return u64(s.size()).raw(s); }
  ByteBuilder& header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
    return raw("GGUF").u32(version).u64(num_tensors).u64(num_kv);
  }
  ByteBuilder& pad_to(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
};

// Reads every value through every getter and every byte of every tensor, so that a view out of
// bounds shows up under ASan. Returns a checksum so nothing is optimized away.
inline uint64_t touch_everything(const GgufFile& g) {
  uint64_t sum = g.version() + g.alignment() + g.data_offset();
  for (const auto& [key, value] : g.metadata()) {
    sum += value_type_name(value.type).size();
    sum += g.find(key) == &value;
    if (auto r = g.get_uint(key)) sum += *r;
    if (auto r = g.get_int(key)) sum += static_cast<uint64_t>(*r);
    if (auto r = g.get_float(key)) sum += *r > 0;
    if (auto r = g.get_bool(key)) sum += *r;
    if (auto r = g.get_string(key)) sum += r->size();
    if (auto r = g.get_string_array(key)) {
      for (const std::string& s : *r) sum += s.size();
    }
    if (auto r = g.get_float_array(key)) sum += r->size();
    if (auto r = g.get_int_array(key)) {
      for (int64_t x : *r) sum += static_cast<uint64_t>(x);
    }
    sum += g.get_uint_or(key, 1);
    sum += g.get_float_or(key, 1.0) > 0;
    sum += g.get_string_or(key, "x").size();
  }
  for (const TensorInfo& t : g.tensors()) {
    TESSERA_CHECK(g.find_tensor(t.name) == &t, "tensor '{}' not found by name", t.name);
    sum += static_cast<uint64_t>(t.rows());
    for (size_t i = 0; i < t.num_bytes; ++i) sum += t.data[i];
  }
  return sum;
}

// Deterministic filler bytes for tensors: byte i of a tensor seeded `seed`.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
  return out;
}

// A small valid file: five keys and two tensors ("tok" F32 [4, 2], "q8" Q8_0 [32]), alignment 32.
inline GgufWriter small_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("test.u32", 7);
  w.set_string("test.str", "hi");
  const std::vector<int32_t> ints = {1, 2, 3};
  w.set_int32_array("test.arr", ints);
  w.set_float32("test.f32", 0.5f);
  TESSERA_CHECK(w.add_tensor("tok", {4, 2}, DType::F32, pattern_bytes(32, 1)).ok(), "");
  TESSERA_CHECK(w.add_tensor("q8", {32}, DType::Q8_0, pattern_bytes(34, 2)).ok(), "");
  return w;
}
inline std::vector<uint8_t> small_gguf() { return small_writer().to_bytes().value(); }

// The fuzz seeds: name (a file in fuzz/corpus/) and bytes. Each under 4 KB. The names have no
// .gguf suffix because the repository's .gitignore ignores *.gguf.
inline std::vector<std::pair<std::string, std::vector<uint8_t>>> fuzz_seed_files() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;
  seeds.emplace_back("seed-empty", GgufWriter().to_bytes().value());
  seeds.emplace_back("seed-small", small_gguf());
  {
    GgufWriter w;
    w.set_uint8("u8", 200);
    w.set_int8("i8", -100);
    w.set_uint16("u16", 60000);
    w.set_int16("i16", -30000);
    w.set_uint32("u32", 4000000000u);
    w.set_int32("i32", -2000000000);
    w.set_uint64("u64", 1ull << 63);
    w.set_int64("i64", -(1ll << 62));
    w.set_float32("f32", 1.5f);
    w.set_float64("f64", -2.25);
    w.set_bool("bool", true);
    w.set_string("str", "");
    const std::vector<std::string> strings = {"a", "", "bc"};
    w.set_string_array("strs", strings);
    const std::vector<float> floats = {0.25f, -1.0f};
    w.set_float_array("floats", floats);
    w.set_int32_array("empty", {});
    w.set_value("nested", make_array_value(ValueType::kArray,
                                           {make_array_value(ValueType::kInt32, {make_int_value(ValueType::kInt32, 5)}),
                                            make_array_value(ValueType::kString, {})}));
    seeds.emplace_back("seed-values", w.to_bytes().value());
  }
  {
    GgufWriter w;
    w.set_alignment(64);
    w.set_string("general.architecture", "llama");
    w.set_uint32("llama.block_count", 1);
    TESSERA_CHECK(w.add_tensor("f16", {8, 2}, DType::F16, pattern_bytes(32, 3)).ok(), "");
    TESSERA_CHECK(w.add_tensor("bf16", {3}, DType::BF16, pattern_bytes(6, 4)).ok(), "");
    TESSERA_CHECK(w.add_tensor("q4_0", {32, 2}, DType::Q4_0, pattern_bytes(36, 5)).ok(), "");
    TESSERA_CHECK(w.add_tensor("q4_k", {256}, DType::Q4_K, pattern_bytes(144, 6)).ok(), "");
    TESSERA_CHECK(w.add_tensor("i32", {2, 1, 1, 2}, DType::I32, pattern_bytes(16, 7)).ok(), "");
    seeds.emplace_back("seed-tensors", w.to_bytes().value());
  }
  {
    GgufWriter w(2);
    w.set_string("tokenizer.ggml.model", "llama");
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the"};
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    const std::vector<float> scores = {0.0f, 0.0f, 0.0f, -1.0f};
    w.set_float_array("tokenizer.ggml.scores", scores);
    const std::vector<int32_t> types = {2, 3, 3, 1};
    w.set_int32_array("tokenizer.ggml.token_type", types);
    w.set_uint32("tokenizer.ggml.bos_token_id", 1);
    TESSERA_CHECK(w.add_tensor_f32("token_embd.weight", {2, 4}, std::vector<float>(8, 0.5f)).ok(), "");
    seeds.emplace_back("seed-v2-vocab", w.to_bytes().value());
  }
  return seeds;
}

}  // namespace tessera::gguf::testing
