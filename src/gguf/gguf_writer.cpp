// GGUF writer: encodes metadata and tensor infos into one header buffer, then streams the tensor
// data with zero padding to the alignment. See gguf_writer.h for the output's invariants.
#include "gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/ranges.h>

namespace tessera::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; so is this writer");

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

Error bad_value(std::string_view key, std::string_view what) {
  return make_error(ErrorCode::kInvalidArgument, "metadata key '{}': {}", key, what);
}

template <typename Stored>
Status put_unsigned(std::vector<uint8_t>& out, const Value& v, std::string_view key) {
  const auto* u = std::get_if<uint64_t>(&v.data);
  if (!u) return bad_value(key, fmt::format("{} value does not hold an unsigned integer", value_type_name(v.type)));
  if (*u > std::numeric_limits<Stored>::max()) {
    return bad_value(key, fmt::format("{} does not fit in {}", *u, value_type_name(v.type)));
  }
  put<Stored>(out, static_cast<Stored>(*u));
  return ok_status();
}

template <typename Stored>
Status put_signed(std::vector<uint8_t>& out, const Value& v, std::string_view key) {
  const auto* i = std::get_if<int64_t>(&v.data);
  if (!i) return bad_value(key, fmt::format("{} value does not hold a signed integer", value_type_name(v.type)));
  if (*i < std::numeric_limits<Stored>::min() || *i > std::numeric_limits<Stored>::max()) {
    return bad_value(key, fmt::format("{} does not fit in {}", *i, value_type_name(v.type)));
  }
  put<Stored>(out, static_cast<Stored>(*i));
  return ok_status();
}

// Encodes the payload of `v` (its type tag is written by the caller: once per key, once per array).
Status put_value(std::vector<uint8_t>& out, const Value& v, std::string_view key) {
  switch (v.type) {
    case ValueType::kUint8: return put_unsigned<uint8_t>(out, v, key);
    case ValueType::kUint16: return put_unsigned<uint16_t>(out, v, key);
    case ValueType::kUint32: return put_unsigned<uint32_t>(out, v, key);
    case ValueType::kUint64: return put_unsigned<uint64_t>(out, v, key);
    case ValueType::kInt8: return put_signed<int8_t>(out, v, key);
    case ValueType::kInt16: return put_signed<int16_t>(out, v, key);
    case ValueType::kInt32: return put_signed<int32_t>(out, v, key);
    case ValueType::kInt64: return put_signed<int64_t>(out, v, key);
    case ValueType::kFloat32:
    case ValueType::kFloat64: {
      const auto* f = std::get_if<double>(&v.data);
      if (!f) return bad_value(key, "float value does not hold a double");
      if (v.type == ValueType::kFloat32) {
        put<float>(out, static_cast<float>(*f));
      } else {
        put<double>(out, *f);
      }
      return ok_status();
    }
    case ValueType::kBool: {
      const auto* b = std::get_if<bool>(&v.data);
      if (!b) return bad_value(key, "bool value does not hold a bool");
      put<uint8_t>(out, *b ? 1 : 0);
      return ok_status();
    }
    case ValueType::kString: {
      const auto* s = std::get_if<std::string>(&v.data);
      if (!s) return bad_value(key, "string value does not hold a string");
      put_string(out, *s);
      return ok_status();
    }
    case ValueType::kArray: {
      const auto* a = std::get_if<ArrayValue>(&v.data);
      if (!a) return bad_value(key, "array value does not hold an array");
      put<uint32_t>(out, static_cast<uint32_t>(a->element_type));
      put<uint64_t>(out, a->items.size());
      for (size_t i = 0; i < a->items.size(); ++i) {
        const Value& item = a->items[i];
        if (item.type != a->element_type) {
          return bad_value(key, fmt::format("array item {} is {} in an array of {}", i,
                                            value_type_name(item.type),
                                            value_type_name(a->element_type)));
        }
        TESSERA_TRY(put_value(out, item, key));
      }
      return ok_status();
    }
  }
  return bad_value(key, fmt::format("invalid value type {}", static_cast<uint32_t>(v.type)));
}

template <typename T, typename Make>
Value array_of(ValueType element_type, std::span<const T> v, Make make) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const T& x : v) items.push_back(make(x));
  return make_array_value(element_type, std::move(items));
}

}  // namespace

Value make_uint_value(ValueType type, uint64_t v) { return Value{type, v}; }
Value make_int_value(ValueType type, int64_t v) { return Value{type, v}; }
Value make_float_value(ValueType type, double v) { return Value{type, v}; }
Value make_bool_value(bool v) { return Value{ValueType::kBool, v}; }
Value make_string_value(std::string v) { return Value{ValueType::kString, std::move(v)}; }
Value make_array_value(ValueType element_type, std::vector<Value> items) {
  return Value{ValueType::kArray, ArrayValue{element_type, std::move(items)}};
}

GgufWriter::GgufWriter(uint32_t version) : version_(version) {
  TESSERA_CHECK(version == 2 || version == 3, "GgufWriter writes GGUF v2 or v3, not v{}", version);
}

void GgufWriter::set_value(std::string_view key, Value v) {
  for (auto& [k, old] : metadata_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  metadata_.emplace_back(std::string(key), std::move(v));
}

void GgufWriter::set_uint8(std::string_view key, uint8_t v) { set_value(key, make_uint_value(ValueType::kUint8, v)); }
void GgufWriter::set_int8(std::string_view key, int8_t v) { set_value(key, make_int_value(ValueType::kInt8, v)); }
void GgufWriter::set_uint16(std::string_view key, uint16_t v) { set_value(key, make_uint_value(ValueType::kUint16, v)); }
void GgufWriter::set_int16(std::string_view key, int16_t v) { set_value(key, make_int_value(ValueType::kInt16, v)); }
void GgufWriter::set_uint32(std::string_view key, uint32_t v) { set_value(key, make_uint_value(ValueType::kUint32, v)); }
void GgufWriter::set_int32(std::string_view key, int32_t v) { set_value(key, make_int_value(ValueType::kInt32, v)); }
void GgufWriter::set_uint64(std::string_view key, uint64_t v) { set_value(key, make_uint_value(ValueType::kUint64, v)); }
void GgufWriter::set_int64(std::string_view key, int64_t v) { set_value(key, make_int_value(ValueType::kInt64, v)); }
void GgufWriter::set_float32(std::string_view key, float v) { set_value(key, make_float_value(ValueType::kFloat32, v)); }
void GgufWriter::set_float64(std::string_view key, double v) { set_value(key, make_float_value(ValueType::kFloat64, v)); }
void GgufWriter::set_bool(std::string_view key, bool v) { set_value(key, make_bool_value(v)); }
void GgufWriter::set_string(std::string_view key, std::string_view v) { set_value(key, make_string_value(std::string(v))); }

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string> v) {
  set_value(key, array_of(ValueType::kString, v, [](const std::string& s) { return make_string_value(s); }));
}
void GgufWriter::set_float_array(std::string_view key, std::span<const float> v) {
  set_value(key, array_of(ValueType::kFloat32, v, [](float x) { return make_float_value(ValueType::kFloat32, x); }));
}
void GgufWriter::set_int32_array(std::string_view key, std::span<const int32_t> v) {
  set_value(key, array_of(ValueType::kInt32, v, [](int32_t x) { return make_int_value(ValueType::kInt32, x); }));
}
void GgufWriter::set_uint32_array(std::string_view key, std::span<const uint32_t> v) {
  set_value(key, array_of(ValueType::kUint32, v, [](uint32_t x) { return make_uint_value(ValueType::kUint32, x); }));
}
void GgufWriter::set_int64_array(std::string_view key, std::span<const int64_t> v) {
  set_value(key, array_of(ValueType::kInt64, v, [](int64_t x) { return make_int_value(ValueType::kInt64, x); }));
}
void GgufWriter::set_uint8_array(std::string_view key, std::span<const uint8_t> v) {
  set_value(key, array_of(ValueType::kUint8, v, [](uint8_t x) { return make_uint_value(ValueType::kUint8, x); }));
}
void GgufWriter::set_bool_array(std::string_view key, std::span<const bool> v) {
  set_value(key, array_of(ValueType::kBool, v, [](bool x) { return make_bool_value(x); }));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  TESSERA_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0,
                "GGUF alignment {} is not a power of two", alignment);
  set_uint32("general.alignment", alignment);
}

Result<uint32_t> GgufWriter::alignment() const {
  for (const auto& [key, v] : metadata_) {
    if (key != "general.alignment") continue;
    const auto* u = std::get_if<uint64_t>(&v.data);
    if (v.type != ValueType::kUint32 || !u || *u == 0 || (*u & (*u - 1)) != 0 || *u > UINT32_MAX) {
      return make_error(ErrorCode::kInvalidArgument,
                        "general.alignment must be a uint32 power of two, got a {}", value_type_name(v.type));
    }
    return static_cast<uint32_t>(*u);
  }
  return kDefaultAlignment;
}

Status GgufWriter::check_tensor(std::string_view name, const std::vector<int64_t>& dims, DType type,
                                size_t num_bytes) const {
  if (name.empty()) return make_error(ErrorCode::kInvalidArgument, "tensor name is empty");
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return make_error(ErrorCode::kInvalidArgument, "duplicate tensor name '{}'", name);
  }
  if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims)) {
    return make_error(ErrorCode::kInvalidArgument, "tensor '{}': {} dimensions (1 to {} allowed)", name,
                      dims.size(), kMaxDims);
  }
  const auto traits = dtype_traits(static_cast<uint32_t>(type));
  if (!traits) {
    return make_error(ErrorCode::kInvalidArgument, "tensor '{}': unknown type {}", name,
                      static_cast<uint32_t>(type));
  }
  int64_t num_elements = 1;
  for (int64_t d : dims) {
    if (d <= 0 || num_elements > std::numeric_limits<int64_t>::max() / d) {
      return make_error(ErrorCode::kInvalidArgument, "tensor '{}': bad dimension {}", name, d);
    }
    num_elements *= d;
  }
  if (dims[0] % traits->block_size != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "tensor '{}': row length {} is not a multiple of the {} block size {}", name,
                      dims[0], traits->name, traits->block_size);
  }
  const size_t expected = static_cast<size_t>(num_elements / traits->block_size) * traits->block_bytes;
  if (num_bytes != expected) {
    return make_error(ErrorCode::kInvalidArgument, "tensor '{}': {} bytes given, {} {} needs {}", name,
                      num_bytes, traits->name, fmt::join(dims, "x"), expected);
  }
  return ok_status();
}

Status GgufWriter::add_tensor(std::string_view name, const std::vector<int64_t>& dims, DType type,
                              std::span<const uint8_t> bytes) {
  TESSERA_TRY(check_tensor(name, dims, type, bytes.size()));
  PendingTensor t{std::string(name), dims, type, std::vector<uint8_t>(bytes.begin(), bytes.end()), {}};
  tensors_.push_back(std::move(t));
  return ok_status();
}

Status GgufWriter::add_tensor_ref(std::string_view name, const std::vector<int64_t>& dims, DType type,
                                  std::span<const uint8_t> bytes) {
  TESSERA_TRY(check_tensor(name, dims, type, bytes.size()));
  tensors_.push_back(PendingTensor{std::string(name), dims, type, {}, bytes});
  return ok_status();
}

Status GgufWriter::add_tensor_f32(std::string_view name, const std::vector<int64_t>& dims,
                                  std::span<const float> values) {
  return add_tensor(name, dims, DType::F32,
                    std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()));
}

template <typename Sink>
Status GgufWriter::serialize(Sink&& sink) const {
  auto alignment = this->alignment();
  if (!alignment) return alignment.error();

  std::vector<uint8_t> header;
  header.insert(header.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(header, version_);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, metadata_.size());
  for (const auto& [key, v] : metadata_) {
    put_string(header, key);
    put<uint32_t>(header, static_cast<uint32_t>(v.type));
    TESSERA_TRY(put_value(header, v, key));
  }
  uint64_t offset = 0;  // of the next tensor, from the start of the data section
  for (const PendingTensor& t : tensors_) {
    put_string(header, t.name);
    put<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(header, static_cast<uint64_t>(d));
    put<uint32_t>(header, static_cast<uint32_t>(t.type));
    put<uint64_t>(header, offset);
    offset = align_up(offset + t.bytes().size(), *alignment);
  }
  header.resize(align_up(header.size(), *alignment), 0);
  TESSERA_TRY(sink(header.data(), header.size()));

  const std::vector<uint8_t> zeros(*alignment, 0);
  for (const PendingTensor& t : tensors_) {
    const std::span<const uint8_t> bytes = t.bytes();
    TESSERA_TRY(sink(bytes.data(), bytes.size()));
    const size_t padding = align_up(bytes.size(), *alignment) - bytes.size();
    if (padding > 0) TESSERA_TRY(sink(zeros.data(), padding));
  }
  return ok_status();
}

Result<std::vector<uint8_t>> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  Status s = serialize([&out](const uint8_t* data, size_t size) -> Status {
    out.insert(out.end(), data, data + size);
    return ok_status();
  });
  if (!s) return s.error();
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error(ErrorCode::kIo, "cannot create '{}': {}", tmp, std::strerror(errno));
  Status s = serialize([&](const uint8_t* data, size_t size) -> Status {
    if (std::fwrite(data, 1, size, f) != size) {
      return make_error(ErrorCode::kIo, "cannot write '{}': {}", tmp, std::strerror(errno));
    }
    return ok_status();
  });
  const bool closed = std::fclose(f) == 0;
  if (s && !closed) s = make_error(ErrorCode::kIo, "cannot write '{}': {}", tmp, std::strerror(errno));
  if (s && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = make_error(ErrorCode::kIo, "cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
  }
  if (!s) std::remove(tmp.c_str());
  return s;
}

}  // namespace tessera::gguf
