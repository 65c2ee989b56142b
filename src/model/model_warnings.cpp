// Load-time warnings about a model file (see model_warnings.h).
#include "model/model_warnings.h"

#include <fmt/format.h>

#include <map>
#include <optional>

namespace tessera {

namespace {

// The main weight type of llama.cpp's LLAMA_FTYPE values (general.file_type); nullopt for values
// this check does not know (guessed, or types tessera does not load).
std::optional<DType> file_type_weight_type(uint64_t file_type) {
  switch (file_type) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 7: return DType::Q8_0;
    case 8: return DType::Q5_0;
    case 9: return DType::Q5_1;
    case 10: return DType::Q2_K;
    case 11: case 12: case 13: return DType::Q3_K;  // Q3_K_S, _M, _L
    case 14: case 15: return DType::Q4_K;           // Q4_K_S, _M
    case 16: case 17: return DType::Q5_K;           // Q5_K_S, _M
    case 18: return DType::Q6_K;
    case 32: return DType::BF16;
    default: return std::nullopt;
  }
}

}  // namespace

std::vector<std::string> model_file_warnings(const gguf::GgufFile& file, const ModelConfig& config) {
  std::vector<std::string> warnings;
  if (const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
      tokens != nullptr && std::holds_alternative<gguf::ArrayValue>(tokens->data)) {
    const auto num_tokens = static_cast<int64_t>(std::get<gguf::ArrayValue>(tokens->data).items.size());
    if (num_tokens < config.vocab_size) {
      warnings.push_back(fmt::format(
          "the vocabulary has {} tokens but token_embd.weight has {} rows: ids {}..{} have no text", num_tokens,
          config.vocab_size, num_tokens, config.vocab_size - 1));
    }
  }
  if (file.has("general.file_type")) {
    const uint64_t file_type = file.get_uint_or("general.file_type", ~uint64_t{0});
    const std::optional<DType> want = file_type_weight_type(file_type);
    std::map<std::string_view, int> found;  // layer matrix type -> count
    bool has_want = false;
    for (const gguf::TensorInfo& t : file.tensors()) {
      if (!t.name.starts_with("blk.") || t.dims.size() != 2) continue;
      found[dtype_name(t.type)] += 1;
      has_want = has_want || (want && t.type == *want);
    }
    if (want && !found.empty() && !has_want) {
      std::string types;
      for (const auto& [name, count] : found) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, name);
      warnings.push_back(fmt::format("general.file_type {} says the weights are {}, but no layer matrix is ({})",
                                     file_type, dtype_name(*want), types));
    }
  }
  return warnings;
}

}  // namespace tessera
