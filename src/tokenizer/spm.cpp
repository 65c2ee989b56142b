// SentencePiece BPE merge loops (see spm.h).
#include "tokenizer/spm.h"

#include <fmt/format.h>

#include <queue>
#include <string>

namespace tessera::tokenizer {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 ▁

// Character length from the lead byte's high nibble, clamped to what is left (llama.cpp's rule:
// stray continuation bytes are 1-byte symbols).
size_t spm_char_len(std::string_view text, size_t offset) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  const size_t len = kLen[static_cast<uint8_t>(text[offset]) >> 4];
  return std::min(len, text.size() - offset);
}

struct Symbol {
  uint32_t offset;  // byte offset of the symbol's text
  uint32_t size;    // byte length (0 once merged into the left neighbour)
  int32_t prev;     // previous live symbol, -1 at the start
  int32_t next;     // next live symbol, -1 at the end
};

struct Bigram {
  float score;     // score of the merged token: higher pops first
  int32_t left;    // symbol index: lower pops first among equal scores
  int32_t right;
  uint32_t size;   // merged byte length at push time (stale when the sides changed)
  bool operator<(const Bigram& o) const {
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

SpmModel::SpmModel(const Vocab& vocab) : vocab_(&vocab) {
  for (int b = 0; b < 256; ++b) {
    int32_t id = vocab.find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = vocab.find(std::string(1, static_cast<char>(b)));
    byte_token_[b] = id >= 0 ? id : vocab.unk_id;
  }
}

void SpmModel::emit_symbol(std::string_view text, std::vector<int32_t>& out) const {
  const int32_t id = vocab_->find(text);
  if (id >= 0) {
    out.push_back(id);
    return;
  }
  for (char c : text) {
    const int32_t b = byte_token_[static_cast<uint8_t>(c)];
    if (b >= 0) out.push_back(b);
  }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = spm_char_len(text, offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(len), index - 1,
                       offset + len < text.size() ? index + 1 : -1});
    offset += len;
  }
  if (symbols.empty()) return;
  std::priority_queue<Bigram> queue;
  auto try_push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].size + symbols[right].size;
    const int32_t id = vocab_->find(text.substr(symbols[left].offset, size));
    if (id >= 0) queue.push({vocab_->scores[id], left, right, size});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_push(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != b.size) continue;  // stale
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_push(l.prev, b.left);
    try_push(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    emit_symbol(text.substr(symbols[i].offset, symbols[i].size), out);
  }
}

void SpmModel::encode_reference(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> pieces;
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = spm_char_len(text, offset);
    pieces.push_back(text.substr(offset, len));
    offset += len;
  }
  while (true) {
    size_t best = pieces.size();
    float best_score = 0.0f;
    for (size_t i = 0; i + 1 < pieces.size(); ++i) {
      const std::string_view merged(pieces[i].data(), pieces[i].size() + pieces[i + 1].size());
      const int32_t id = vocab_->find(merged);
      if (id >= 0 && (best == pieces.size() || vocab_->scores[id] > best_score)) {
        best = i;
        best_score = vocab_->scores[id];
      }
    }
    if (best == pieces.size()) break;
    pieces[best] = std::string_view(pieces[best].data(), pieces[best].size() + pieces[best + 1].size());
    pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (std::string_view p : pieces) emit_symbol(p, out);
}

std::string spm_escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceMark);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string spm_unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpaceMark.size()) == kSpaceMark) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace tessera::tokenizer
