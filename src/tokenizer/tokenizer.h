// Tokenizer: text <-> token ids for the vocabularies GGUF files carry.
//   tokenizer.ggml.model = "gpt2":  byte-level BPE, pre-tokenizer by tokenizer.ggml.pre
//   tokenizer.ggml.model = "llama": SentencePiece BPE with <0xXX> byte fallback
// Special tokens: with parse_special, control tokens (<|im_start|>, <s>...) and <unk> are matched
// in the text before BPE, longest text first; user-defined (added) tokens are always matched.
//
// A Tokenizer is immutable after from_gguf and cheap to copy (shared state); encode/decode are
// safe to call from many threads (the per-word BPE cache is guarded by a mutex).
//
// Decoding: control tokens render as "" unless render_special; SentencePiece vocabularies with
// add_space_prefix drop one leading space from the first token after any leading BOS tokens, so
// decode(encode(s, add_bos, false)) == s. Output is raw bytes (may be invalid UTF-8 mid-stream:
// use IncrementalDetokenizer to stream text).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace tessera::tokenizer {

class Tokenizer {
 public:
  // Errors: unknown tokenizer.ggml.model or tokenizer.ggml.pre, missing or inconsistent arrays.
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);
  static Result<Tokenizer> from_vocab(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Slow twin of encode: reference merge loops, no cache. Must return the same ids.
  std::vector<int32_t> encode_reference(std::string_view text, bool add_bos,
                                        bool parse_special) const;

  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;
  // Bytes of one token, out of context (no leading-space removal).
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;
  int32_t eot_id() const;  // end of turn (<|im_end|>, <|eot_id|>, <end_of_turn>...), or -1
  int32_t eom_id() const;  // end of message (<|eom_id|>), or -1
  // Every id generation should stop on: eos, eot, eom and well-known end texts. Sorted, unique.
  const std::vector<int32_t>& eog_ids() const;
  bool is_eog(int32_t id) const;
  bool add_bos() const;  // the model's default for prompts
  bool is_special(int32_t id) const;  // control, user-defined or unknown token
  int32_t token_id(std::string_view piece) const;  // exact vocab text -> id, -1 when absent
  const std::string& token_text(int32_t id) const;  // the vocab text as stored
  VocabType vocab_type() const;
  PreTokenizerType pre_tokenizer() const;  // meaningful for kBpe only
  // True for SentencePiece vocabularies that prefix a space (decode strips it again).
  bool strips_leading_space() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tessera::tokenizer
