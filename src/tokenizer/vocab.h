// Vocabulary as stored in a GGUF file: token texts, scores, types and the special ids.
// Invariants after load_vocab: tokens, scores and types have num_tokens entries; every special
// id is -1 (absent) or in [0, num_tokens); token_to_id maps each text to its lowest id.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "util/status.h"

namespace tessera::tokenizer {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, <|im_end|>: matched in text only with parse_special
  kUserDefined = 4,  // added tokens: always matched in text, rendered verbatim
  kUnused = 5,
  kByte = 6,         // <0xXX> byte-fallback tokens of SentencePiece
};

enum class VocabType {
  kSpm,  // tokenizer.ggml.model = "llama": SentencePiece BPE with byte fallback
  kBpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE
};

// Hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  VocabType type = VocabType::kBpe;
  std::string pre;                    // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;    // [num_tokens] token text (SPM: with ▁; BPE: byte-mapped)
  std::vector<float> scores;          // [num_tokens] SPM merge priority (0 when absent)
  std::vector<TokenType> types;       // [num_tokens]
  std::vector<std::string> merges;    // [num_merges] "left right", rank = index (BPE only)
  TokenMap token_to_id;               // text -> id

  int32_t bos_id = -1;  // tokenizer.ggml.bos_token_id
  int32_t eos_id = -1;  // tokenizer.ggml.eos_token_id
  int32_t eot_id = -1;  // tokenizer.ggml.eot_token_id or found by text (<|eot_id|>, <|im_end|>...)
  int32_t eom_id = -1;  // tokenizer.ggml.eom_token_id or <|eom_id|>
  int32_t unk_id = -1;  // tokenizer.ggml.unknown_token_id
  bool add_bos = false;           // tokenizer.ggml.add_bos_token (SPM default true)
  bool add_space_prefix = true;   // tokenizer.ggml.add_space_prefix (SPM only; default true)

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
};

Result<Vocab> load_vocab(const gguf::GgufFile& file);

}  // namespace tessera::tokenizer
