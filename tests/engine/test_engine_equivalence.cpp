// Greedy equivalence on stories260K (F32, GQA 8/4 heads): batched vs alone, chunked vs unchunked
// prefill, preempted vs uninterrupted, static vs continuous, prefix cache on vs off, block size
// 1/16/32 all give the same tokens as each request run alone (see equivalence_suite.h).
#include "equivalence_suite.h"

namespace tessera::testing {
namespace {

EquivalenceSuite& suite() {
  // Seven prompts from 1 to 100 tokens; three share a 48-token prefix (three 16-token blocks).
  static EquivalenceSuite s({.model_path = TESSERA_TESTDATA_DIR "/models/stories260K.gguf",
                             .prompt_lens = {5, 17, 33, 1, 9, 70, 100},
                             .num_shared = 3,
                             .prefix_len = 48,
                             .max_tokens = 24,
                             .first_id = 3,
                             .seed = 7});
  return s;
}

TEST(EngineEquivalenceStories, BatchedEqualsAlone) { suite().batched_vs_alone(); }
TEST(EngineEquivalenceStories, ChunkedEqualsUnchunked) { suite().chunked_vs_unchunked(); }
TEST(EngineEquivalenceStories, PreemptedEqualsUninterrupted) { suite().preempted_vs_uninterrupted(); }
TEST(EngineEquivalenceStories, StaticEqualsContinuous) { suite().static_vs_continuous(); }
TEST(EngineEquivalenceStories, PrefixCacheOnEqualsOff) { suite().prefix_cache_on_vs_off(); }
TEST(EngineEquivalenceStories, BlockSizes1_16_32Agree) { suite().block_sizes(); }

}  // namespace
}  // namespace tessera::testing
