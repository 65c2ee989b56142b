// IncrementalDetokenizer: turns a stream of token ids into text deltas that are always whole
// UTF-8 characters, for streaming generated text.
//
// Invariants:
//   - a delta never ends inside a UTF-8 sequence: incomplete trailing bytes are held back until
//     the following tokens complete them;
//   - a definitively invalid sequence (bad lead byte, bad continuation, overlong, surrogate) is
//     emitted as U+FFFD, one per maximal invalid subpart (the WHATWG/Unicode rule);
//   - for ids whose decode is valid UTF-8, the concatenation of all deltas plus flush() equals
//     Tokenizer::decode(ids, render_special) (same leading-space rule).
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tessera::tokenizer {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  // Appends one token; returns the text that became complete (possibly empty).
  std::string feed(int32_t id);
  // End of stream: held-back bytes (an unfinished sequence) come out as U+FFFD.
  std::string flush();
  // Bytes held back, waiting for the rest of a character.
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  bool seen_text_ = false;  // a non-BOS token has been fed (leading-space rule)
  std::string pending_;     // bytes not yet emitted: a prefix of one UTF-8 sequence
};

// Splits valid-so-far text: appends to `out` every complete character of `bytes` (invalid parts as
// U+FFFD) and returns how many trailing bytes form a still-incomplete sequence.
size_t append_complete_utf8(std::string_view bytes, std::string& out);

}  // namespace tessera::tokenizer
