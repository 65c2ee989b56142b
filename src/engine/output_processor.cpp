#include "engine/output_processor.h"

#include <algorithm>

namespace tessera {

namespace {
// Largest n <= limit such that text[0, n) ends on a UTF-8 character boundary.
size_t utf8_boundary_at_or_before(const std::string& text, size_t limit) {
  size_t n = std::min(limit, text.size());
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}
}  // namespace

OutputProcessor::OutputProcessor(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop,
                                 bool include_stop_str)
    : detokenizer_(tokenizer), stop_(std::move(stop)), include_stop_str_(include_stop_str) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
  for (const std::string& s : stop_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

std::string OutputProcessor::take(size_t end) {
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

OutputProcessor::Delta OutputProcessor::append(int32_t token_id) {
  Delta d;
  if (stopped_) return d;
  text_ += detokenizer_.feed(token_id);
  if (max_stop_len_ == 0) {
    d.text = take(text_.size());
    return d;
  }
  // A stop string can only start where it could not have been seen before: search from the first
  // byte a new match could use.
  const size_t search_from = emitted_;
  size_t best = std::string::npos, best_len = 0;
  for (const std::string& s : stop_) {
    const size_t at = text_.find(s, search_from);
    if (at != std::string::npos && at < best) best = at, best_len = s.size();
  }
  if (best != std::string::npos) {
    stopped_ = true;
    d.stop_matched = true;
    d.text = take(include_stop_str_ ? best + best_len : best);
    return d;
  }
  // Hold back the last max_stop_len - 1 bytes: they might begin a stop string.
  const size_t safe = text_.size() >= max_stop_len_ - 1 ? text_.size() - (max_stop_len_ - 1) : 0;
  const size_t end = utf8_boundary_at_or_before(text_, safe);
  if (end > emitted_) d.text = take(end);
  return d;
}

std::string OutputProcessor::flush() {
  if (stopped_) return {};
  text_ += detokenizer_.flush();
  return take(text_.size());
}

}  // namespace tessera
