// OutputProcessor: turns one sample's new token ids into text deltas — incremental UTF-8-safe
// detokenization, stop strings (matched across token boundaries; text that might begin a stop
// string is held back until it is decided), and the final flush.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class OutputProcessor {
 public:
  OutputProcessor(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop,
                  bool include_stop_str);

  struct Delta {
    std::string text;        // text to emit now
    bool stop_matched = false;  // a stop string was found: the sample is finished
  };
  // Appends one token's text. After stop_matched, further calls return nothing.
  Delta append(int32_t token_id);
  // The sample finished for another reason: emit whatever was held back.
  std::string flush();

 private:
  std::string take(size_t end);

  tokenizer::IncrementalDetokenizer detokenizer_;
  std::vector<std::string> stop_;
  bool include_stop_str_;
  size_t max_stop_len_ = 0;
  std::string text_;        // all text generated so far
  size_t emitted_ = 0;      // bytes of text_ already emitted
  bool stopped_ = false;
};

}  // namespace tessera
