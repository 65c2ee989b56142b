// Byte-level BPE: byte map, merge table and the two merge loops (see bpe.h).
#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/unicode.h"

namespace tessera::tokenizer {

const std::array<uint32_t, 256>& byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    // Printable bytes keep their codepoint; the others are moved to 256, 257, ... in byte order.
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

int32_t unicode_to_byte(uint32_t cp) {
  static const std::unordered_map<uint32_t, int32_t> inverse = [] {
    std::unordered_map<uint32_t, int32_t> m;
    for (int32_t b = 0; b < 256; ++b) m[byte_to_unicode()[b]] = b;
    return m;
  }();
  auto it = inverse.find(cp);
  return it == inverse.end() ? -1 : it->second;
}

std::string bytes_to_bpe_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_unicode()[static_cast<uint8_t>(c)], out);
  return out;
}

bool bpe_text_to_bytes(std::string_view text, std::string& out) {
  size_t pos = 0;
  bool ok = true;
  while (pos < text.size()) {
    const int32_t b = unicode_to_byte(decode_utf8_at(text, pos));
    if (b < 0) {
      ok = false;
      continue;
    }
    out.push_back(static_cast<char>(b));
  }
  return ok;
}

Result<BpeModel> BpeModel::build(const Vocab& vocab) {
  BpeModel model;
  model.vocab_ = &vocab;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    append_utf8(byte_to_unicode()[b], text);
    model.byte_token_[b] = vocab.find(text);
  }
  model.merges_.reserve(vocab.merges.size());
  std::string merged;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    // "left right": split on the first space after position 0 (a part is never empty).
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      return make_error(ErrorCode::kCorruptFile, "merge {} '{}' has no space", rank, m);
    }
    const std::string_view left(m.data(), space);
    const std::string_view right(m.data() + space + 1, m.size() - space - 1);
    const int32_t left_id = vocab.find(left), right_id = vocab.find(right);
    merged.assign(left);
    merged.append(right);
    const int32_t result = vocab.find(merged);
    if (left_id < 0 || right_id < 0 || result < 0) continue;
    model.merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }
  return model;
}

bool BpeModel::whole_word_token(std::string_view word, std::vector<int32_t>& out) const {
  const int32_t id = vocab_->find(bytes_to_bpe_text(word));
  if (id < 0) return false;
  out.push_back(id);
  return true;
}

namespace {

// A symbol of the word being merged: a token and its neighbours in the linked list.
struct Symbol {
  int32_t id;    // token id (-1: a byte without a token; never merges)
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool live;     // false once merged into its left neighbour
};

struct Bigram {
  int32_t rank;   // merge rank: lower pops first
  int32_t left;   // symbol index: lower pops first among equal ranks
  int32_t right;  // symbol index at push time
  int32_t left_id, right_id;  // token ids at push time (stale if either changed)
  bool operator>(const Bigram& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

void BpeModel::encode_word(std::string_view word, bool ignore_merges,
                           std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges && whole_word_token(word, out)) return;
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_token_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Bigram, std::vector<Bigram>, std::greater<>> queue;
  auto try_push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Merge* m = find_merge(symbols[left].id, symbols[right].id);
    if (m) queue.push({m->rank, left, right, symbols[left].id, symbols[right].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_push(i, i + 1);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    if (!l.live || l.next != b.right || l.id != b.left_id || symbols[b.right].id != b.right_id) {
      continue;  // outdated: one side was merged since
    }
    Symbol& r = symbols[b.right];
    l.id = find_merge(l.id, r.id)->result;
    r.live = false;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_push(l.prev, b.left);
    try_push(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) out.push_back(symbols[i].id);
  }
}

void BpeModel::encode_word_reference(std::string_view word, bool ignore_merges,
                                     std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges && whole_word_token(word, out)) return;
  std::vector<int32_t> ids;
  for (char c : word) ids.push_back(byte_token_[static_cast<uint8_t>(c)]);
  while (true) {
    size_t best = ids.size();
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const Merge* m = ids[i] >= 0 && ids[i + 1] >= 0 ? find_merge(ids[i], ids[i + 1]) : nullptr;
      if (m && m->rank < best_rank) {
        best_rank = m->rank;
        best = i;
      }
    }
    if (best == ids.size()) break;
    ids[best] = find_merge(ids[best], ids[best + 1])->result;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (int32_t id : ids) {
    if (id >= 0) out.push_back(id);
  }
}

}  // namespace tessera::tokenizer
