// Typed metadata and tensor look-ups. Errors say which key, what was expected and what was found.
#include <limits>

#include "gguf/gguf.h"

namespace tessera::gguf {

namespace {

Error missing(std::string_view key) {
  return make_error(ErrorCode::kNotFound, "metadata key '{}' is missing", key);
}

Error mistyped(std::string_view key, std::string_view expected, const Value& v) {
  return make_error(ErrorCode::kCorruptFile, "metadata key '{}': expected {}, found {}", key, expected,
                    value_type_name(v.type));
}

template <typename T, typename Convert>
Result<std::vector<T>> array_of(const GgufFile& g, std::string_view key, std::string_view expected,
                                Convert convert) {
  const Value* v = g.find(key);
  if (!v) return missing(key);
  const auto* array = std::get_if<ArrayValue>(&v->data);
  if (!array) return mistyped(key, expected, *v);
  std::vector<T> out;
  out.reserve(array->items.size());
  for (const Value& item : array->items) {
    auto x = convert(item);
    if (!x) return mistyped(key, expected, item);
    out.push_back(std::move(*x));
  }
  return out;
}

}  // namespace

const Value* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto* u = std::get_if<uint64_t>(&v->data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v->data); i && *i >= 0) return static_cast<uint64_t>(*i);
  return mistyped(key, "a non-negative integer", *v);
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto* i = std::get_if<int64_t>(&v->data)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v->data);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(*u);
  }
  return mistyped(key, "an integer", *v);
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto* f = std::get_if<double>(&v->data)) return *f;
  if (const auto* u = std::get_if<uint64_t>(&v->data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v->data)) return static_cast<double>(*i);
  return mistyped(key, "a number", *v);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto* b = std::get_if<bool>(&v->data)) return *b;
  return mistyped(key, "a bool", *v);
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto* s = std::get_if<std::string>(&v->data)) return *s;
  return mistyped(key, "a string", *v);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  return array_of<std::string>(*this, key, "an array of strings",
                               [](const Value& item) -> std::optional<std::string> {
                                 if (const auto* s = std::get_if<std::string>(&item.data)) return *s;
                                 return std::nullopt;
                               });
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  return array_of<float>(*this, key, "an array of numbers",
                         [](const Value& item) -> std::optional<float> {
                           if (const auto* f = std::get_if<double>(&item.data)) return static_cast<float>(*f);
                           if (const auto* u = std::get_if<uint64_t>(&item.data)) return static_cast<float>(*u);
                           if (const auto* i = std::get_if<int64_t>(&item.data)) return static_cast<float>(*i);
                           return std::nullopt;
                         });
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  return array_of<int64_t>(*this, key, "an array of integers",
                           [](const Value& item) -> std::optional<int64_t> {
                             if (const auto* i = std::get_if<int64_t>(&item.data)) return *i;
                             if (const auto* u = std::get_if<uint64_t>(&item.data);
                                 u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                               return static_cast<int64_t>(*u);
                             }
                             return std::nullopt;  // a uint64 above INT64_MAX does not fit
                           });
}

uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  auto r = get_uint(key);
  return r ? *r : fallback;
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  auto r = get_float(key);
  return r ? *r : fallback;
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  auto r = get_string(key);
  return r ? *r : fallback;
}

}  // namespace tessera::gguf
