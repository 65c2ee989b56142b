// libFuzzer target over grammar text: parse, compile against a small byte vocabulary, walk a few
// tokens with masks. Any input must end in a value or an error, never a crash, a hang or
// unbounded memory (the parser's and automaton's limits).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_grammar.h"

namespace {

std::shared_ptr<const tessera::grammar::TokenTable> small_vocab() {
  tessera::grammar::TokenVocabulary v;
  for (int b = 0; b < 256; ++b) v.bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"ab", "{\"", "\":", "12", "\xce\xb1", "  ", "\"}", "true"}) v.bytes.push_back(s);
  v.bytes.push_back("");
  v.stop_ids = {static_cast<int32_t>(v.bytes.size()) - 1};
  return std::make_shared<const tessera::grammar::TokenTable>(std::move(v));
}

void exercise(const std::string& grammar_text) {
  static const auto tokens = small_vocab();
  auto compiled = tessera::grammar::compile_grammar(grammar_text, tokens);
  if (!compiled.ok()) return;
  tessera::grammar::GrammarMatcher m(compiled.value());
  std::vector<uint64_t> mask(tessera::grammar::mask_words(tokens->vocab_size()));
  for (int step = 0; step < 8 && !m.is_complete(); ++step) {
    m.fill_mask(mask);
    int32_t pick = -1;
    for (int32_t id = 0; id < tokens->vocab_size() && pick < 0; ++id) {
      if (tessera::grammar::mask_test(mask, (id * 37 + step) % tokens->vocab_size())) {
        pick = (id * 37 + step) % tokens->vocab_size();
      }
    }
    if (pick < 0 || !m.accept_token(pick)) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The first byte picks the front end, so one target covers all three texts.
  const uint8_t mode = size ? data[0] % 3 : 0;
  if (mode == 0) {
    exercise(text);
  } else if (mode == 1) {
    auto g = tessera::grammar::regex_to_grammar(text.substr(1));
    if (g.ok()) exercise(g.value());
  } else {
    auto g = tessera::grammar::json_schema_to_grammar(text.substr(1));
    if (g.ok()) exercise(g.value());
  }
  return 0;
}
