// Tokenizer: special-token partition, per-vocabulary encode paths, decode (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

namespace tessera::tokenizer {

struct Tokenizer::Impl {
  Vocab vocab;
  PreTokenizerType pre = PreTokenizerType::kGpt2;
  bool ignore_merges = false;                  // Llama-3: whole-word tokens skip BPE
  std::optional<BpeModel> bpe;                 // kBpe only
  std::optional<SpmModel> spm;                 // kSpm only
  std::vector<int32_t> special_ids;            // matchable specials, longest text first
  std::vector<int32_t> eog_ids;                // sorted, unique
  std::vector<uint8_t> is_special;             // [num_tokens] 1 for control/user/unknown

  // word (raw bytes) -> ids; bounded, cleared when full.
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
};

namespace {

// A piece of the input: raw text to tokenize, or an already matched special token.
struct Fragment {
  std::string_view text;  // raw text (empty when token >= 0)
  int32_t token = -1;     // special token id, or -1 for raw text
};

// Splits text at occurrences of special tokens, longest token text first (llama.cpp's order).
std::vector<Fragment> partition_special(const Tokenizer::Impl& t, std::string_view text,
                                        bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({text, -1});
  std::vector<Fragment> next;
  for (int32_t id : t.special_ids) {
    const TokenType type = t.vocab.types[id];
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& special = t.vocab.tokens[id];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at = rest.find(special); at != std::string_view::npos; at = rest.find(special)) {
        if (at > 0) next.push_back({rest.substr(0, at), -1});
        next.push_back({{}, id});
        rest.remove_prefix(at + special.size());
        changed = true;
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

// Replaces bytes that are not valid UTF-8 with U+FFFD (as llama.cpp does before pre-tokenizing).
std::string_view sanitize_utf8(std::string_view text, std::string& storage) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = valid_utf8_prefix_len(text.substr(pos));
    if (len == 0) break;
    pos += len;
  }
  if (pos == text.size()) return text;
  storage.clear();
  pos = 0;
  while (pos < text.size()) append_utf8(decode_utf8_at(text, pos), storage);
  return storage;
}

enum class MergeImpl { kFast, kReference };

std::vector<int32_t> encode_fragments(const Tokenizer::Impl& t, const std::vector<Fragment>& frags,
                                      size_t num_bytes, bool add_bos, MergeImpl impl) {
  std::vector<int32_t> out;
  out.reserve(num_bytes / 3 + 2);
  if (add_bos && t.vocab.bos_id >= 0) out.push_back(t.vocab.bos_id);
  if (t.vocab.type == VocabType::kSpm) {
    bool prev_special = true;  // the text start counts as "after a special token"
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string raw;
      raw.reserve(f.text.size() + 1);
      if (t.vocab.add_space_prefix && prev_special) raw.push_back(' ');
      raw.append(f.text);
      const std::string escaped = spm_escape_spaces(raw);
      if (impl == MergeImpl::kFast) {
        t.spm->encode(escaped, out);
      } else {
        t.spm->encode_reference(escaped, out);
      }
      prev_special = false;
    }
    return out;
  }
  std::string storage;
  std::vector<std::string_view> words;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    words.clear();
    pre_tokenize(t.pre, sanitize_utf8(f.text, storage), words);
    for (std::string_view word : words) {
      if (impl == MergeImpl::kReference) {
        t.bpe->encode_word_reference(word, t.ignore_merges, out);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(t.cache_mutex);
        auto it = t.cache.find(word);
        if (it != t.cache.end()) {
          out.insert(out.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      const size_t first = out.size();
      t.bpe->encode_word(word, t.ignore_merges, out);
      std::lock_guard<std::mutex> lock(t.cache_mutex);
      if (t.cache.size() >= Tokenizer::Impl::kMaxCacheEntries) t.cache.clear();
      t.cache.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
    }
  }
  return out;
}

std::vector<int32_t> encode_impl(const Tokenizer::Impl& t, std::string_view text, bool add_bos,
                                 bool parse_special, MergeImpl impl) {
  return encode_fragments(t, partition_special(t, text, parse_special), text.size(), add_bos, impl);
}

// The escape of special-token text in chat input (see tokenizer.h): U+FDD0 <id> U+FDD1.
constexpr std::string_view kEscapeOpen = "\xEF\xB7\x90";   // U+FDD0
constexpr std::string_view kEscapeClose = "\xEF\xB7\x91";  // U+FDD1

// Appends `text` with each literal U+FDD0 written as U+FDD0 U+FDD1.
void append_escaping_open(std::string_view text, std::string& out) {
  for (size_t at = text.find(kEscapeOpen); at != std::string_view::npos; at = text.find(kEscapeOpen)) {
    out.append(text.substr(0, at)).append(kEscapeOpen).append(kEscapeClose);
    text.remove_prefix(at + kEscapeOpen.size());
  }
  out.append(text);
}

// True for a token that encode matches only with parse_special (control, unknown): the kinds a
// request's text must not produce.
bool is_parse_special_only(const Tokenizer::Impl& t, int32_t id) {
  return t.vocab.types[id] != TokenType::kUserDefined;
}

bool is_special_type(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  Result<Vocab> vocab = load_vocab(file);
  if (!vocab.ok()) return vocab.error().with_context("loading tokenizer");
  Result<Tokenizer> t = from_vocab(std::move(*vocab));
  if (!t.ok()) return t.error().with_context("loading tokenizer");
  return t;
}

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  auto impl = std::make_shared<Impl>();
  impl->vocab = std::move(vocab);
  const Vocab& v = impl->vocab;
  if (v.type == VocabType::kBpe) {
    // A gpt2 vocabulary without a pre key gets llama.cpp's default chain.
    Result<PreTokenizerType> pre = pre_tokenizer_from_name(v.pre.empty() ? "default" : v.pre);
    if (!pre.ok()) return pre.error();
    impl->pre = *pre;
    impl->ignore_merges = impl->pre == PreTokenizerType::kLlama3;
    Result<BpeModel> bpe = BpeModel::build(v);
    if (!bpe.ok()) return bpe.error();
    impl->bpe.emplace(std::move(*bpe));
  } else {
    impl->spm.emplace(v);
  }
  impl->is_special.assign(v.num_tokens(), 0);
  for (int32_t id = 0; id < v.num_tokens(); ++id) {
    if (!is_special_type(v.types[id])) continue;
    impl->is_special[id] = 1;
    if (!v.tokens[id].empty()) impl->special_ids.push_back(id);
  }
  std::stable_sort(impl->special_ids.begin(), impl->special_ids.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) {
    if (id >= 0) impl->eog_ids.push_back(id);
  }
  for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                           "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>"}) {
    const int32_t id = v.find(text);
    if (id >= 0 && v.types[id] == TokenType::kControl) impl->eog_ids.push_back(id);
  }
  std::sort(impl->eog_ids.begin(), impl->eog_ids.end());
  impl->eog_ids.erase(std::unique(impl->eog_ids.begin(), impl->eog_ids.end()),
                      impl->eog_ids.end());
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  return encode_impl(*impl_, text, add_bos, parse_special, MergeImpl::kFast);
}

std::vector<int32_t> Tokenizer::encode_reference(std::string_view text, bool add_bos,
                                                 bool parse_special) const {
  return encode_impl(*impl_, text, add_bos, parse_special, MergeImpl::kReference);
}

std::string Tokenizer::escape_special(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (const Fragment& f : partition_special(*impl_, text, /*parse_special=*/true)) {
    if (f.token < 0) {
      append_escaping_open(f.text, out);
    } else if (is_parse_special_only(*impl_, f.token)) {
      out.append(kEscapeOpen).append(std::to_string(f.token)).append(kEscapeClose);
    } else {
      append_escaping_open(impl_->vocab.tokens[f.token], out);
    }
  }
  return out;
}

std::string Tokenizer::unescape_special(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t at = text.find(kEscapeOpen); at != std::string_view::npos; at = text.find(kEscapeOpen)) {
    out.append(text.substr(0, at));
    text.remove_prefix(at + kEscapeOpen.size());
    size_t digits = 0;
    while (digits < text.size() && digits < 10 && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (!text.substr(digits).starts_with(kEscapeClose)) {  // not an escape (a template cut it): as is
      out.append(kEscapeOpen);
      continue;
    }
    if (digits == 0) {
      out.append(kEscapeOpen);
    } else {
      const int64_t id = std::stoll(std::string(text.substr(0, digits)));
      if (id >= vocab_size()) {
        out.append(kEscapeOpen).append(text.substr(0, digits + kEscapeClose.size()));
      } else {
        out.append(impl_->vocab.tokens[static_cast<size_t>(id)]);
      }
    }
    text.remove_prefix(digits + kEscapeClose.size());
  }
  out.append(text);
  return out;
}

std::vector<int32_t> Tokenizer::encode_escaped(std::string_view text, bool add_bos) const {
  // The template's markup: every special token. Then each raw piece that holds escapes is
  // unescaped and split again the way encode without parse_special splits (user-defined only).
  std::vector<Fragment> frags;
  std::deque<std::string> unescaped;  // owns the text the fragments point into
  for (const Fragment& f : partition_special(*impl_, text, /*parse_special=*/true)) {
    if (f.token >= 0 || f.text.find(kEscapeOpen) == std::string_view::npos) {
      frags.push_back(f);
      continue;
    }
    unescaped.push_back(unescape_special(f.text));
    for (const Fragment& g : partition_special(*impl_, unescaped.back(), /*parse_special=*/false)) frags.push_back(g);
  }
  return encode_fragments(*impl_, frags, text.size(), add_bos, MergeImpl::kFast);
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.num_tokens()) return {};
  const std::string& text = v.tokens[id];
  switch (v.types[id]) {
    case TokenType::kControl:
      return render_special ? text : std::string();
    case TokenType::kUserDefined:
      return text;
    case TokenType::kUnknown:
      return render_special ? text : std::string("\xE2\x96\x85");  // ▅, as llama.cpp
    case TokenType::kByte:
      if (v.type == VocabType::kSpm && text.size() == 6 && text.starts_with("<0x")) {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      break;
    default:
      break;
  }
  if (v.type == VocabType::kSpm) return spm_unescape_spaces(text);
  std::string bytes;
  bpe_text_to_bytes(text, bytes);
  return bytes;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool seen_text = false;  // a non-BOS token has been decoded
  for (int32_t id : ids) {
    if (!seen_text && id == impl_->vocab.bos_id) {
      out += token_to_piece(id, render_special);
      continue;
    }
    std::string piece = token_to_piece(id, render_special);
    if (!seen_text && strips_leading_space() && piece.starts_with(' ')) piece.erase(0, 1);
    seen_text = true;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab.num_tokens(); }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos_id; }
int32_t Tokenizer::eot_id() const { return impl_->vocab.eot_id; }
int32_t Tokenizer::eom_id() const { return impl_->vocab.eom_id; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog_ids; }
bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog_ids.begin(), impl_->eog_ids.end(), id);
}
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->is_special[id];
}
int32_t Tokenizer::token_id(std::string_view piece) const { return impl_->vocab.find(piece); }
const std::string& Tokenizer::token_text(int32_t id) const {
  TESSERA_CHECK(id >= 0 && id < vocab_size(), "token id {} outside [0, {})", id, vocab_size());
  return impl_->vocab.tokens[id];
}
VocabType Tokenizer::vocab_type() const { return impl_->vocab.type; }
PreTokenizerType Tokenizer::pre_tokenizer() const { return impl_->pre; }
bool Tokenizer::strips_leading_space() const {
  return impl_->vocab.type == VocabType::kSpm && impl_->vocab.add_space_prefix;
}

}  // namespace tessera::tokenizer
