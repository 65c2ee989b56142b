// Pre-tokenizers of the byte-level BPE vocabularies: they split text into "words" that BPE then
// encodes independently. Each is the hand-written equivalent of a regex (no std::regex: it is slow
// and knows nothing of Unicode classes), selected by the GGUF key `tokenizer.ggml.pre`.
//
// A pre-tokenizer is a chain of stages. Each stage splits every piece from the previous stage into
// the regex matches and the unmatched text between them (both kept, as llama.cpp does), and a
// stage sees the end of its piece as the end of the text (lookaheads stop there).
//   kGpt2:      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kStarcoder: \p{N}  (each digit alone), then kGpt2          (also SmolLM2's `smollm`)
//   kLlama3:    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//               ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2:     kLlama3 with \p{N} instead of \p{N}{1,3}
//   kDefault:   [\p{P}\$\+<=>\^~\|]+, then kGpt2, then \p{N}+, then [0-9][0-9][0-9]
// Invariant: the pieces are non-empty, in order, and concatenate to the input exactly.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tessera::tokenizer {

enum class PreTokenizerType { kDefault, kGpt2, kStarcoder, kLlama3, kQwen2 };

// Maps a `tokenizer.ggml.pre` value ("gpt-2", "smollm", "llama-bpe", ...) to a type.
Result<PreTokenizerType> pre_tokenizer_from_name(std::string_view name);
std::string_view pre_tokenizer_name(PreTokenizerType type);

// Splits valid UTF-8 `text` (the caller replaces invalid bytes first) into words, appended to
// `words` as views into `text`.
void pre_tokenize(PreTokenizerType type, std::string_view text,
                  std::vector<std::string_view>& words);

}  // namespace tessera::tokenizer
