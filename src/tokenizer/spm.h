// SentencePiece BPE (tokenizer.ggml.model = "llama") over already-escaped text (spaces are ▁,
// the optional leading ▁ added by the caller).
//
// Symbols start as the UTF-8 characters of the text; the adjacent pair whose concatenation is a
// token with the highest score merges first (ties: leftmost). A final symbol that is a token is
// emitted; one that is not (a character outside the vocabulary) falls back to its bytes as
// <0xXX> tokens. Two implementations that must agree: encode (bigram priority queue over a linked
// list, as llama.cpp's llm_tokenizer_spm) and encode_reference (rescan all pairs per merge).
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tessera::tokenizer {

class SpmModel {
 public:
  explicit SpmModel(const Vocab& vocab);

  void encode(std::string_view text, std::vector<int32_t>& out) const;
  void encode_reference(std::string_view text, std::vector<int32_t>& out) const;

  // Token for a raw byte: <0xXX>, else the one-byte text, else <unk>.
  int32_t byte_token(uint8_t byte) const { return byte_token_[byte]; }

 private:
  void emit_symbol(std::string_view text, std::vector<int32_t>& out) const;

  const Vocab* vocab_;
  std::array<int32_t, 256> byte_token_{};  // [256] token id per byte
};

// Replaces each ' ' with U+2581 (▁) and back.
std::string spm_escape_spaces(std::string_view text);
std::string spm_unescape_spaces(std::string_view text);

}  // namespace tessera::tokenizer
