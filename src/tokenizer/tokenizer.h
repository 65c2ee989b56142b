// Tokenizer: text <-> token ids for the vocabularies GGUF files carry.
//   tokenizer.ggml.model = "gpt2":  byte-level BPE, pre-tokenizer by tokenizer.ggml.pre
//   tokenizer.ggml.model = "llama": SentencePiece BPE with <0xXX> byte fallback
// Special tokens: with parse_special, control tokens (<|im_start|>, <s>...) and <unk> are matched
// in the text before BPE, longest text first; user-defined (added) tokens are always matched.
//
// A Tokenizer is immutable after from_gguf and cheap to copy (shared state); encode/decode are
// safe to call from many threads (the per-word BPE cache is guarded by a mutex).
//
// Chat prompts: text a request supplies (a message's content, a role, tool arguments...) must not
// become control tokens, or a user could forge a turn (issue 30, finding 11). Such text is escaped
// before the template renders it (escape_special: each control or unknown token's text, as encode
// with parse_special would match it, becomes U+FDD0 <decimal id> U+FDD1; a literal U+FDD0 becomes
// U+FDD0 U+FDD1; both are Unicode noncharacters, reserved for internal use). encode_escaped then
// parses the template's own markup as special tokens and tokenizes each escaped span as plain text;
// unescape_special gives back the text the escapes stand for. Text with no special-token text in it
// is not changed, so a template that trims, splits or compares it renders exactly as before.
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

  std::string escape_special(std::string_view text) const;
  std::vector<int32_t> encode_escaped(std::string_view text, bool add_bos) const;
  std::string unescape_special(std::string_view text) const;

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
