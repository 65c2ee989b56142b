// Byte-level BPE (GPT-2 style) over one pre-tokenized word.
//
// GPT-2 maps each byte to a printable codepoint (byte_to_unicode) so token texts are printable;
// a word's initial symbols are the tokens of its bytes, and merges apply in rank order (rank =
// position in tokenizer.ggml.merges, lowest first; ties go to the leftmost pair).
// Two implementations that must agree: encode_word (bigram priority queue over a linked list of
// symbols, merge table keyed by token-id pairs: no string work while merging) and
// encode_word_reference (rescan all pairs after each merge: obviously right, quadratic).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/status.h"

namespace tessera::tokenizer {

// The 256-entry GPT-2 byte -> codepoint map and its inverse (-1 for codepoints not in it).
const std::array<uint32_t, 256>& byte_to_unicode();
int32_t unicode_to_byte(uint32_t cp);
// Byte string -> byte-mapped UTF-8 token text, and back (false on a codepoint outside the map).
std::string bytes_to_bpe_text(std::string_view bytes);
bool bpe_text_to_bytes(std::string_view text, std::string& out);

class BpeModel {
 public:
  // Builds the merge table; merges whose parts or result are not tokens are skipped.
  static Result<BpeModel> build(const Vocab& vocab);

  // Appends the ids of one word (raw bytes). With ignore_merges (Llama-3), a word that is a token
  // as a whole is emitted directly.
  void encode_word(std::string_view word, bool ignore_merges, std::vector<int32_t>& out) const;
  void encode_word_reference(std::string_view word, bool ignore_merges,
                             std::vector<int32_t>& out) const;

  int32_t num_merges() const { return static_cast<int32_t>(merges_.size()); }

 private:
  struct Merge {
    int32_t rank;    // index in tokenizer.ggml.merges
    int32_t result;  // token id of the merged text
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const {
    auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }
  bool whole_word_token(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab* vocab_ = nullptr;
  std::array<int32_t, 256> byte_token_{};     // token id of each byte's mapped char (-1: none)
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> merge
};

}  // namespace tessera::tokenizer
