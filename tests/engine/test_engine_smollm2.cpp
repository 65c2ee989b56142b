// Greedy equivalence on the real default model, SmolLM2-135M-Instruct Q4_1 (LABEL model): the same
// cases as on stories260K (see equivalence_suite.h), sized to stay well under a minute on 2 cores.
#include <filesystem>

#include "equivalence_suite.h"

namespace tessera::testing {
namespace {

const std::string kModel = TESSERA_PROJECT_TESTDATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";

EquivalenceSuite& suite() {
  // Five prompts from 3 to 90 tokens; two share a 40-token prefix (two full 16-token blocks).
  static EquivalenceSuite s({.model_path = kModel,
                             .prompt_lens = {6, 21, 3, 45, 90},
                             .num_shared = 2,
                             .prefix_len = 40,
                             .max_tokens = 12,
                             .first_id = 256,
                             .seed = 11});
  return s;
}

class EngineEquivalenceSmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel << " (run scripts/setup.sh)";
  }
};

TEST_F(EngineEquivalenceSmolLM2, BatchedEqualsAlone) { suite().batched_vs_alone(); }
TEST_F(EngineEquivalenceSmolLM2, ChunkedEqualsUnchunked) { suite().chunked_vs_unchunked(); }
TEST_F(EngineEquivalenceSmolLM2, PreemptedEqualsUninterrupted) { suite().preempted_vs_uninterrupted(); }
TEST_F(EngineEquivalenceSmolLM2, StaticEqualsContinuous) { suite().static_vs_continuous(); }
TEST_F(EngineEquivalenceSmolLM2, PrefixCacheOnEqualsOff) { suite().prefix_cache_on_vs_off(); }
TEST_F(EngineEquivalenceSmolLM2, BlockSizes1_16_32Agree) { suite().block_sizes(); }

}  // namespace
}  // namespace tessera::testing
