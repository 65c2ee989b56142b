// Teacher-forced logits of tessera, for comparing its numerics with another implementation's
// (scripts/llamacpp_self_agreement.py reads them next to llama.cpp's). It lives beside the model
// tests because it decodes through their harness (forward_harness.h).
//
//   dump_forced_logits MODEL.gguf KV IN OUT
//     KV:  f16 or f32, the KV cache element type
//     IN:  one sequence a line, "prompt ids ... | forced ids ..." (decimal token ids)
//     OUT: per line, [n_forced][vocab] f32 (native byte order): the logits after the prompt (one
//          chunk), then after each forced token but the last, fed one token at a time, the way
//          tests/model/test_kquant_golden.cpp decodes (one sequence, blocks 0, 1, 2, ...).
#include <algorithm>
#include <exception>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "forward_harness.h"

using namespace tessera;

namespace {

struct ForcedSequence {
  std::vector<int32_t> prompt, forced;
};

bool parse_line(const std::string& line, ForcedSequence* out) {
  std::istringstream in(line);
  std::string word;
  bool after_bar = false;
  while (in >> word) {
    if (word == "|") {
      after_bar = true;
      continue;
    }
    size_t used = 0;
    int id = -1;
    try {
      id = std::stoi(word, &used);
    } catch (const std::exception&) {  // not a number, or out of int's range
      return false;
    }
    if (used != word.size() || id < 0) return false;
    (after_bar ? out->forced : out->prompt).push_back(id);
  }
  return after_bar && !out->prompt.empty() && !out->forced.empty();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 || (std::string(argv[2]) != "f16" && std::string(argv[2]) != "f32")) {
    std::fprintf(stderr, "usage: dump_forced_logits MODEL.gguf f16|f32 IN OUT\n");
    return 2;
  }
  auto model = LlamaModel::load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  const auto kv = std::string(argv[2]) == "f32" ? kernels::KvDType::kF32 : kernels::KvDType::kF16;
  std::ifstream in(argv[3]);
  FILE* out = std::fopen(argv[4], "wb");
  if (!in || out == nullptr) {
    std::fprintf(stderr, "cannot open %s or %s\n", argv[3], argv[4]);
    return 1;
  }
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    ForcedSequence s;
    const int32_t vocab = (*model)->config().vocab_size;
    const auto in_vocab = [vocab](int32_t id) { return id < vocab; };
    if (!parse_line(line, &s) || !std::all_of(s.prompt.begin(), s.prompt.end(), in_vocab) ||
        !std::all_of(s.forced.begin(), s.forced.end(), in_vocab)) {
      std::fprintf(stderr, "%s:%d: expected \"prompt ids | forced ids\" (token ids in [0, %d))\n", argv[3], lineno, vocab);
      return 1;
    }
    // 1024 as the kquant test (more when the sequence is longer): the sizes change no value.
    const auto context = std::max<int32_t>(1024, static_cast<int32_t>(s.prompt.size() + s.forced.size()));
    testing::SingleSequence seq(**model, context, 16, 2, kv);
    std::vector<float> logits = seq.feed(s.prompt);
    for (size_t i = 0; i < s.forced.size(); ++i) {
      std::fwrite(logits.data(), sizeof(float), logits.size(), out);
      if (i + 1 < s.forced.size()) logits = seq.feed({s.forced[i]});
    }
  }
  return std::fclose(out) == 0 ? 0 : 1;
}
