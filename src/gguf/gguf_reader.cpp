// GGUF parsing with every read bounds-checked. See gguf.h for the layout.
#include <algorithm>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace tessera::gguf {

namespace {

// Limits that no real file comes near; they keep a hostile header from making us allocate or loop
// unboundedly before the bounds checks catch up.
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr int kMaxArrayNesting = 4;
// Decoded metadata may exceed twice the file size by this much (small vocabulary-only files decode
// their short token strings to several times their encoded size).
constexpr uint64_t kDecodedSlackBytes = uint64_t{64} << 20;

size_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kBool: return 1;
    case ValueType::kUint16: case ValueType::kInt16: return 2;
    case ValueType::kUint32: case ValueType::kInt32: case ValueType::kFloat32: return 4;
    case ValueType::kUint64: case ValueType::kInt64: case ValueType::kFloat64: return 8;
    case ValueType::kString: return 8;        // the length prefix
    case ValueType::kArray: return 4 + 8;     // element type + count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

}  // namespace

std::string_view value_type_name(ValueType type) {
  static constexpr std::string_view kNames[] = {"uint8", "int8", "uint16", "int16", "uint32",
                                                "int32", "float32", "bool", "string", "array",
                                                "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : std::string_view("invalid");
}

int64_t TensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

// Cursor over the file bytes; every read checks the remaining length first.
class Parser {
 public:
  explicit Parser(const MappedFile& f)
      : data_(f.data()), size_(f.size()), decoded_budget_(2 * uint64_t{f.size()} + kDecodedSlackBytes) {}

  // Charges `bytes` of decoded metadata to the budget before they are allocated. A GGUF value takes
  // more room decoded than encoded (a 1-byte uint8 array item becomes a ~48-byte Value), so a file
  // whose metadata would decode to more than 2x its size + kDecodedSlackBytes is refused up front:
  // a 32 MiB file of one uint8 array asked for 1.5 GiB before this check.
  Status charge(uint64_t bytes, std::string_view key) {
    if (bytes <= decoded_budget_ - decoded_bytes_) {
      decoded_bytes_ += bytes;
      return ok_status();
    }
    return make_error(ErrorCode::kCorruptFile,
                      "key '{}': metadata would take more than {} bytes in memory decoded, more than a "
                      "{}-byte file can justify", key, decoded_budget_, size_);
  }

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  // Checks that `count` items of at least `min_item_bytes` each fit in what is left. A count that
  // could not fit even in the whole file is "absurd"; one that only overruns the end is "truncated".
  Status check_count(uint64_t count, size_t min_item_bytes, std::string_view what) const {
    if (count <= remaining() / min_item_bytes) return ok_status();
    if (count > size_ / min_item_bytes) {
      return make_error(ErrorCode::kCorruptFile, "absurd {} {} at offset {} for a {}-byte file", what,
                        count, pos_, size_);
    }
    return make_error(ErrorCode::kCorruptFile,
                      "truncated file: {} {} at offset {} need at least {} bytes, only {} left", what,
                      count, pos_, count * min_item_bytes, remaining());
  }

  Status read_bytes(void* out, size_t n, std::string_view what) {
    if (n > remaining()) {
      return make_error(ErrorCode::kCorruptFile,
                        "truncated file: need {} bytes for {} at offset {}, only {} left", n, what,
                        pos_, remaining());
    }
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return ok_status();
  }

  template <typename T>
  Result<T> read(std::string_view what) {
    T v{};
    TESSERA_TRY(read_bytes(&v, sizeof(T), what));
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    auto len = read<uint64_t>(what);
    if (!len) return len.error();
    if (*len > kMaxStringBytes) {
      return make_error(ErrorCode::kCorruptFile, "{}: absurd string length {} at offset {}", what, *len,
                        pos_ - 8);
    }
    if (auto s = check_count(*len, 1, "string length"); !s) return s.error().with_context(std::string(what));
    TESSERA_TRY(charge(*len, what));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(*len));
    pos_ += static_cast<size_t>(*len);
    return s;
  }

  Result<Value> read_value(ValueType type, std::string_view key, int depth) {
    Value v;
    v.type = type;
    switch (type) {
      case ValueType::kUint8: return scalar<uint8_t, uint64_t>(v, key);
      case ValueType::kInt8: return scalar<int8_t, int64_t>(v, key);
      case ValueType::kUint16: return scalar<uint16_t, uint64_t>(v, key);
      case ValueType::kInt16: return scalar<int16_t, int64_t>(v, key);
      case ValueType::kUint32: return scalar<uint32_t, uint64_t>(v, key);
      case ValueType::kInt32: return scalar<int32_t, int64_t>(v, key);
      case ValueType::kUint64: return scalar<uint64_t, uint64_t>(v, key);
      case ValueType::kInt64: return scalar<int64_t, int64_t>(v, key);
      case ValueType::kFloat32: return scalar<float, double>(v, key);
      case ValueType::kFloat64: return scalar<double, double>(v, key);
      case ValueType::kBool: {
        auto b = read<uint8_t>(key);
        if (!b) return b.error();
        if (*b > 1) {
          return make_error(ErrorCode::kCorruptFile, "key '{}': bool value {} is not 0 or 1", key, *b);
        }
        v.data = *b != 0;
        return v;
      }
      case ValueType::kString: {
        auto s = read_string(key);
        if (!s) return s.error();
        v.data = std::move(*s);
        return v;
      }
      case ValueType::kArray: {
        if (depth >= kMaxArrayNesting) {
          return make_error(ErrorCode::kCorruptFile, "key '{}': arrays nested deeper than {}", key,
                            kMaxArrayNesting);
        }
        auto elem = read<uint32_t>(key);
        if (!elem) return elem.error();
        if (!valid_value_type(*elem)) {
          return make_error(ErrorCode::kCorruptFile, "key '{}': invalid array element type {}", key,
                            *elem);
        }
        auto count = read<uint64_t>(key);
        if (!count) return count.error();
        const auto elem_type = static_cast<ValueType>(*elem);
        if (auto s = check_array_length(*count, elem_type); !s) {
          return s.error().with_context(fmt::format("key '{}'", key));
        }
        TESSERA_TRY(charge(*count * sizeof(Value), key));  // count <= file size: no overflow
        ArrayValue array;
        array.element_type = elem_type;
        array.items.reserve(static_cast<size_t>(*count));
        for (uint64_t i = 0; i < *count; ++i) {
          auto item = read_value(elem_type, key, depth + 1);
          if (!item) return item.error();
          array.items.push_back(std::move(*item));
        }
        v.data = std::move(array);
        return v;
      }
    }
    return make_error(ErrorCode::kCorruptFile, "key '{}': invalid value type {}", key,
                      static_cast<uint32_t>(type));
  }

 private:
  Status check_array_length(uint64_t count, ValueType elem_type) const {
    return check_count(count, min_encoded_size(elem_type),
                       fmt::format("array length (of {})", value_type_name(elem_type)));
  }

  template <typename Stored, typename Held>
  Result<Value> scalar(Value& v, std::string_view key) {
    auto x = read<Stored>(key);
    if (!x) return x.error();
    v.data = static_cast<Held>(*x);
    return v;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t decoded_budget_;     // bytes of decoded metadata allowed (see charge)
  uint64_t decoded_bytes_ = 0;  // charged so far
};

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  auto parsed = parse(std::move(*file));
  if (!parsed) return parsed.error().with_context("'" + path + "'");
  return parsed;
}

Result<GgufFile> GgufFile::parse(MappedFile mapped) {
  GgufFile g;
  g.file_ = std::move(mapped);
  Parser p(g.file_);

  // Bad magic first (even in a short file), then a header cut short.
  char magic[4] = {0, 0, 0, 0};
  const size_t num_magic = std::min<size_t>(4, g.file_.size());
  if (num_magic > 0) std::memcpy(magic, g.file_.data(), num_magic);  // data() is null when empty
  if (std::memcmp(magic, "GGUF", num_magic) != 0) {
    return make_error(ErrorCode::kCorruptFile, "not a GGUF file: bad magic {:02x}{:02x}{:02x}{:02x}",
                      static_cast<uint8_t>(magic[0]), static_cast<uint8_t>(magic[1]),
                      static_cast<uint8_t>(magic[2]), static_cast<uint8_t>(magic[3]));
  }
  if (g.file_.size() < 4 + 4 + 8 + 8) {
    return make_error(ErrorCode::kCorruptFile,
                      "truncated file: {} bytes is shorter than the 24-byte GGUF header", g.file_.size());
  }
  TESSERA_TRY(p.read_bytes(magic, 4, "magic"));
  g.version_ = p.read<uint32_t>("version").value();
  if (g.version_ != 2 && g.version_ != 3) {
    return make_error(ErrorCode::kUnsupported, "GGUF version {} is not supported (2 and 3 are)",
                      g.version_);
  }
  const uint64_t tensor_count = p.read<uint64_t>("tensor count").value();
  const uint64_t kv_count = p.read<uint64_t>("metadata count").value();
  // Each kv needs at least a key length, a type and 1 byte; each tensor at least 8+4+8+4+8 bytes.
  TESSERA_TRY(p.check_count(kv_count, 8 + 4 + 1, "metadata count"));
  TESSERA_TRY(p.check_count(tensor_count, 8 + 4 + 8 + 4 + 8, "tensor count"));

  for (uint64_t i = 0; i < kv_count; ++i) {
    auto key = p.read_string("metadata key");
    if (!key) return key.error().with_context(fmt::format("metadata entry {}", i));
    auto type = p.read<uint32_t>("value type");
    if (!type) return type.error().with_context(fmt::format("key '{}'", *key));
    if (!valid_value_type(*type)) {
      return make_error(ErrorCode::kCorruptFile, "key '{}': invalid value type {}", *key, *type);
    }
    auto value = p.read_value(static_cast<ValueType>(*type), *key, 0);
    if (!value) return value.error();
    if (g.metadata_index_.count(*key)) {
      return make_error(ErrorCode::kCorruptFile, "duplicate metadata key '{}'", *key);
    }
    g.metadata_index_.emplace(*key, g.metadata_.size());
    g.metadata_.emplace_back(std::move(*key), std::move(*value));
  }

  if (const Value* a = g.find("general.alignment")) {
    const auto* u = std::get_if<uint64_t>(&a->data);
    if (!u || a->type != ValueType::kUint32 || *u == 0 || (*u & (*u - 1)) != 0 || *u > (1u << 20)) {
      return make_error(ErrorCode::kCorruptFile,
                        "general.alignment must be a uint32 power of two, got {} {}",
                        value_type_name(a->type), u ? std::to_string(*u) : std::string("?"));
    }
    g.alignment_ = static_cast<uint32_t>(*u);
  }

  g.tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t;
    auto name = p.read_string("tensor name");
    if (!name) return name.error().with_context(fmt::format("tensor {}", i));
    t.name = std::move(*name);
    auto n_dims = p.read<uint32_t>("tensor dims");
    if (!n_dims) return n_dims.error().with_context("tensor '" + t.name + "'");
    if (*n_dims == 0 || *n_dims > kMaxDims) {
      return make_error(ErrorCode::kCorruptFile, "tensor '{}': {} dimensions (1 to {} allowed)", t.name,
                        *n_dims, kMaxDims);
    }
    t.num_elements = 1;
    for (uint32_t d = 0; d < *n_dims; ++d) {
      auto ne = p.read<uint64_t>("tensor dim");
      if (!ne) return ne.error().with_context("tensor '" + t.name + "'");
      if (*ne == 0 || *ne > (uint64_t{1} << 40) ||
          static_cast<uint64_t>(t.num_elements) > (uint64_t{1} << 50) / *ne) {
        return make_error(ErrorCode::kCorruptFile, "tensor '{}': absurd dimension {} = {}", t.name, d,
                          *ne);
      }
      t.dims.push_back(static_cast<int64_t>(*ne));
      t.num_elements *= static_cast<int64_t>(*ne);
    }
    auto type = p.read<uint32_t>("tensor type");
    if (!type) return type.error().with_context("tensor '" + t.name + "'");
    const auto traits = dtype_traits(*type);
    if (!traits) {
      return make_error(ErrorCode::kUnsupported, "tensor '{}': unknown tensor type {}", t.name, *type);
    }
    t.type = static_cast<DType>(*type);
    if (t.dims[0] % traits->block_size != 0) {
      return make_error(ErrorCode::kCorruptFile,
                        "tensor '{}': row length {} is not a multiple of the {} block size {}",
                        t.name, t.dims[0], traits->name, traits->block_size);
    }
    t.num_bytes = static_cast<size_t>(t.num_elements / traits->block_size) * traits->block_bytes;
    auto offset = p.read<uint64_t>("tensor offset");
    if (!offset) return offset.error().with_context("tensor '" + t.name + "'");
    t.offset = *offset;
    if (t.offset % g.alignment_ != 0) {
      return make_error(ErrorCode::kCorruptFile, "tensor '{}': offset {} is not aligned to {}", t.name,
                        t.offset, g.alignment_);
    }
    if (g.tensor_index_.count(t.name)) {
      return make_error(ErrorCode::kCorruptFile, "duplicate tensor name '{}'", t.name);
    }
    g.tensor_index_.emplace(t.name, g.tensors_.size());
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = p.pos();
  g.data_offset_ = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (g.data_offset_ > g.file_.size() && !g.tensors_.empty()) {
    return make_error(ErrorCode::kCorruptFile, "truncated file: data section would start at {} past the end ({})",
                      g.data_offset_, g.file_.size());
  }
  const uint64_t data_size = g.file_.size() >= g.data_offset_ ? g.file_.size() - g.data_offset_ : 0;

  // Every tensor lies inside the data section, and no two overlap.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(g.tensors_.size());
  for (TensorInfo& t : g.tensors_) {
    if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
      return make_error(ErrorCode::kCorruptFile,
                        "tensor '{}': data [{}, {}) runs past the end of the data section ({} bytes)",
                        t.name, t.offset, t.offset + t.num_bytes, data_size);
    }
    t.data = g.file_.data() + g.data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    if (prev->offset + prev->num_bytes > by_offset[i]->offset) {
      return make_error(ErrorCode::kCorruptFile, "tensors '{}' and '{}' overlap", prev->name,
                        by_offset[i]->name);
    }
  }
  return g;
}

}  // namespace tessera::gguf
