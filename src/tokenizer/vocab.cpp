// Loads the tokenizer.ggml.* metadata into a Vocab (see vocab.h), checking every id.
#include "tokenizer/vocab.h"

#include <array>

namespace tessera::tokenizer {
namespace {

Result<int32_t> optional_id(const gguf::GgufFile& file, std::string_view key, int32_t num_tokens) {
  if (!file.has(key)) return -1;
  Result<int64_t> v = file.get_int(key);
  if (!v.ok()) {
    // Some converters write 0xFFFFFFFF (u32 -1) for "none".
    Result<uint64_t> u = file.get_uint(key);
    if (u.ok() && *u == 0xFFFFFFFFull) return -1;
    return v.error();
  }
  if (*v == -1 || *v == 0xFFFFFFFFll) return -1;
  if (*v < 0 || *v >= num_tokens) {
    return make_error(ErrorCode::kCorruptFile, "{} = {} is outside the vocabulary of {} tokens",
                      key, *v, num_tokens);
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

Result<Vocab> load_vocab(const gguf::GgufFile& file) {
  Vocab vocab;
  Result<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  if (*model == "llama") {
    vocab.type = VocabType::kSpm;
  } else if (*model == "gpt2") {
    vocab.type = VocabType::kBpe;
  } else {
    return make_error(ErrorCode::kUnsupported,
                      "unknown tokenizer.ggml.model = '{}' (supported: llama, gpt2)", *model);
  }
  vocab.pre = file.get_string_or("tokenizer.ggml.pre", "");

  Result<std::vector<std::string>> tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.error();
  vocab.tokens = std::move(*tokens);
  const int32_t num_tokens = vocab.num_tokens();
  if (num_tokens == 0) return make_error(ErrorCode::kCorruptFile, "tokenizer.ggml.tokens is empty");

  vocab.scores.assign(num_tokens, 0.0f);
  if (file.has("tokenizer.ggml.scores")) {
    Result<std::vector<float>> scores = file.get_float_array("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.error();
    if (static_cast<int32_t>(scores->size()) != num_tokens) {
      return make_error(ErrorCode::kCorruptFile, "tokenizer.ggml.scores has {} entries, tokens {}",
                        scores->size(), num_tokens);
    }
    vocab.scores = std::move(*scores);
  }
  vocab.types.assign(num_tokens, TokenType::kNormal);
  if (file.has("tokenizer.ggml.token_type")) {
    Result<std::vector<int64_t>> types = file.get_int_array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.error();
    if (static_cast<int32_t>(types->size()) != num_tokens) {
      return make_error(ErrorCode::kCorruptFile,
                        "tokenizer.ggml.token_type has {} entries, tokens {}", types->size(),
                        num_tokens);
    }
    for (int32_t i = 0; i < num_tokens; ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        return make_error(ErrorCode::kCorruptFile, "token {} has unknown token_type {}", i, t);
      }
      vocab.types[i] = static_cast<TokenType>(t);
    }
  }
  if (vocab.type == VocabType::kBpe) {
    Result<std::vector<std::string>> merges = file.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.error().with_context("a gpt2 vocabulary needs merges");
    vocab.merges = std::move(*merges);
  }
  vocab.token_to_id.reserve(num_tokens);
  for (int32_t i = 0; i < num_tokens; ++i) vocab.token_to_id.emplace(vocab.tokens[i], i);

  struct IdKey {
    const char* key;
    int32_t* id;
  };
  for (IdKey k : {IdKey{"tokenizer.ggml.bos_token_id", &vocab.bos_id},
                  IdKey{"tokenizer.ggml.eos_token_id", &vocab.eos_id},
                  IdKey{"tokenizer.ggml.eot_token_id", &vocab.eot_id},
                  IdKey{"tokenizer.ggml.eom_token_id", &vocab.eom_id},
                  IdKey{"tokenizer.ggml.unknown_token_id", &vocab.unk_id}}) {
    Result<int32_t> id = optional_id(file, k.key, num_tokens);
    if (!id.ok()) return id.error();
    *k.id = *id;
  }
  if (vocab.type == VocabType::kSpm) {
    // SentencePiece conventions when the keys are absent: <unk>=0, <s>=1, </s>=2.
    if (vocab.unk_id < 0 && num_tokens > 0) vocab.unk_id = 0;
    if (vocab.bos_id < 0 && num_tokens > 1) vocab.bos_id = 1;
    if (vocab.eos_id < 0 && num_tokens > 2) vocab.eos_id = 2;
  }
  // End-of-turn tokens by their well-known texts, when the file does not name them.
  if (vocab.eot_id < 0) {
    for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                             "<|endoftext|>", "<EOT>", "<|end_of_text|>"}) {
      const int32_t id = vocab.find(text);
      if (id >= 0 && vocab.types[id] == TokenType::kControl) {
        vocab.eot_id = id;
        break;
      }
    }
  }
  if (vocab.eom_id < 0) {
    const int32_t id = vocab.find("<|eom_id|>");
    if (id >= 0 && vocab.types[id] == TokenType::kControl) vocab.eom_id = id;
  }
  vocab.add_bos = vocab.type == VocabType::kSpm;
  if (file.has("tokenizer.ggml.add_bos_token")) {
    Result<bool> b = file.get_bool("tokenizer.ggml.add_bos_token");
    if (!b.ok()) return b.error();
    vocab.add_bos = *b;
  }
  if (file.has("tokenizer.ggml.add_space_prefix")) {
    Result<bool> b = file.get_bool("tokenizer.ggml.add_space_prefix");
    if (!b.ok()) return b.error();
    vocab.add_space_prefix = *b;
  }
  if (vocab.add_bos && vocab.bos_id < 0) {
    return make_error(ErrorCode::kCorruptFile, "add_bos_token is set but there is no bos_token_id");
  }
  return vocab;
}

}  // namespace tessera::tokenizer
