// llama.cpp's greedy goldens for the real K-quant files (tests/data/*_greedy.json, written by
// scripts/gen_kquant_goldens.py) and the rule a tessera token is held to at a position where it
// parts from llama.cpp. Shared by the model-level (tests/model/test_kquant_golden.cpp) and
// engine-level (tests/engine/test_engine_gemma3_window.cpp) comparisons; the end-to-end tests
// (tests/e2e/test_real_models.py) apply the same rule in Python.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::testing {

// A parting is accepted only on a near-tie of llama.cpp's own logits: tessera's token is one of
// llama.cpp's best `max_rank` (2: its runner-up) and llama.cpp's logit for it is within this of
// its best.
inline constexpr float kNearTieGap = 0.5f;

// The ranks each model's partings measure today (the goldens of tests/model/test_kquant_golden.cpp
// and tests/engine/test_engine_gemma3_window.cpp). Qwen2.5-Coder-0.5B parts on llama.cpp's
// runner-up only. Gemma-3-270M's logits have three- and four-way near-ties (llama.cpp's best four
// within 0.5 of each other), and tessera picks llama.cpp's #3 or #4 at some of them.
inline constexpr int kQwen25MaxRank = 2;
inline constexpr int kGemma3MaxRank = 4;

struct LlamaCppCase {
  std::string name;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;              // llama.cpp's greedy continuation (past EOS)
  std::vector<float> top2_gaps;                 // per position: logit top-1 minus top-2
  std::vector<std::vector<int32_t>> top_ids;    // per position: the 5 highest-logit ids, best first
  std::vector<std::vector<float>> top_logits;   // per position: their logits
};

// The cases of tests/data/<file>.
inline std::vector<LlamaCppCase> load_llamacpp_cases(const std::string& file) {
  std::ifstream in(std::string(TESSERA_PROJECT_TESTDATA_DIR "/") + file);
  const nlohmann::json golden = nlohmann::json::parse(in);  // named: .at() of a temporary would dangle
  std::vector<LlamaCppCase> out;
  for (const auto& c : golden.at("cases")) {
    out.push_back({c.at("name").get<std::string>(), c.at("prompt_ids").get<std::vector<int32_t>>(),
                   c.at("greedy_ids").get<std::vector<int32_t>>(), c.at("top2_gaps").get<std::vector<float>>(),
                   c.at("top_ids").get<std::vector<std::vector<int32_t>>>(),
                   c.at("top_logits").get<std::vector<std::vector<float>>>()});
  }
  return out;
}

// Empty when tessera's token `ours` at position k (where llama.cpp's is c.greedy_ids[k]) is
// acceptable: the same token, or one of llama.cpp's best `max_rank` whose llama.cpp logit is
// within kNearTieGap of the best; else why not.
inline std::string parting_error(const LlamaCppCase& c, size_t k, int32_t ours, int max_rank) {
  if (ours == c.greedy_ids.at(k)) return "";
  const std::vector<int32_t>& top = c.top_ids.at(k);
  const auto rank = static_cast<int>(std::find(top.begin(), top.end(), ours) - top.begin());
  std::ostringstream why;
  why << c.name << " parts from llama.cpp at token " << k << " (ours " << ours << ", theirs " << c.greedy_ids[k]
      << "): ";
  if (rank == static_cast<int>(top.size())) {
    why << "not in llama.cpp's top-" << top.size();
    return why.str();
  }
  const float below = c.top_logits.at(k).at(0) - c.top_logits[k].at(static_cast<size_t>(rank));
  if (rank < max_rank && below < kNearTieGap) return "";
  why << "llama.cpp's #" << rank + 1 << " (at most #" << max_rank << " accepted), " << below
      << " below its best (a near-tie is under " << kNearTieGap << ")";
  return why.str();
}

}  // namespace tessera::testing
