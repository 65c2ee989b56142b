#include "util/kv_dtype.h"

namespace tessera {

Result<KvDType> parse_kv_dtype(std::string_view name) {
  if (name == "f16") return KvDType::kF16;
  if (name == "f32") return KvDType::kF32;
  if (name == "q8") return KvDType::kQ8;
  return make_error(ErrorCode::kInvalidArgument, "kv dtype '{}' must be f16, f32 or q8", name);
}

const char* kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kQ8: return "q8";
  }
  return "?";
}

}  // namespace tessera
