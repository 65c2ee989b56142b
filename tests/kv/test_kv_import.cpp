// KvCacheManager::import_blocks: blocks a lower tier (the disk) read back enter the prefix cache
// as if computed, chained to what the pool holds, and a later admission finds them as a hit.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_seq.h"

namespace tessera::kv {
namespace {

using kvtest::iota;
using kvtest::TestSeq;
using kvtest::V;

TEST(KvImport, ContinuesThePoolsChainAndIsFoundByAdmission) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s(1, iota(17, 0), 4);  // 4 full blocks + 1 token: a hit covers at most 16 tokens
  // The pool holds blocks 0 and 1 of the chain (computed, then freed).
  PrefixHit none = kv.get_computed_blocks(s.view());
  ASSERT_TRUE(kv.allocate_slots(1, 0, 8, &none));
  kv.cache_blocks(s.view(), 8);
  kv.free(1);
  EXPECT_EQ(kv.get_computed_blocks(s.view()).num_tokens, 8);
  // Blocks 2 and 3 come from disk: new pool blocks 3 and 4 (1, 2 are cached, held while importing).
  const std::vector<ImportBlock> blocks = {{0, 2}, {0, 3}};
  EXPECT_EQ(kv.import_blocks(s.view(), blocks), (V{3, 4}));
  kv.check_integrity();
  const PrefixHit hit = kv.get_computed_blocks(s.view());
  EXPECT_EQ(hit.num_tokens, 16);
  EXPECT_EQ(hit.block_ids, (V{1, 2, 3, 4}));
  // Free and cached, the chain's tail at the back of the queue.
  EXPECT_EQ(kv.pool().counts().num_cached, 4);
  EXPECT_EQ(kv.pool().free_queue_order(), (V{5, 6, 7, 8, 9, 10, 4, 3, 2, 1}));
  // Importing again is a no-op: cached already.
  EXPECT_EQ(kv.import_blocks(s.view(), blocks), (V{0, 0}));
}

TEST(KvImport, AFullGroupsChainStopsAtAGap) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s(1, iota(17, 0), 4);
  // Block 1 is missing (a corrupt file): block 2 cannot chain, nothing after block 0 enters.
  const std::vector<ImportBlock> blocks = {{0, 0}, {0, 2}, {0, 3}};
  EXPECT_EQ(kv.import_blocks(s.view(), blocks), (V{1, 0, 0}));
  EXPECT_EQ(kv.get_computed_blocks(s.view()).num_tokens, 4);
  kv.check_integrity();
}

TEST(KvImport, NoFreeBlockMeansNotImported) {
  KvCacheManager kv({.num_blocks = 3, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s(1, iota(17, 0), 4);
  TestSeq other(2, iota(8, 100), 4);
  PrefixHit none = kv.get_computed_blocks(other.view());
  ASSERT_TRUE(kv.allocate_slots(2, 0, 8, &none));  // both usable blocks in use
  EXPECT_EQ(kv.import_blocks(s.view(), std::vector<ImportBlock>{{0, 0}}), (V{0}));
  kv.check_integrity();
}

TEST(KvImport, SlidingGroupBlocksEnterWithTheirWindow) {
  // Group 0 full, group 1 a window of 4 tokens: a hit of 16 tokens needs group 1's block 3 only.
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true, .groups = {{0}, {4}}});
  TestSeq s(1, iota(17, 0), 4);
  const std::vector<ImportBlock> blocks = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 3}};
  EXPECT_EQ(kv.import_blocks(s.view(), blocks), (V{1, 2, 3, 4, 5}));
  kv.check_integrity();
  const PrefixHit hit = kv.get_computed_blocks(s.view());
  EXPECT_EQ(hit.num_tokens, 16);
  EXPECT_EQ(hit.block_ids, (V{1, 2, 3, 4, 0, 0, 0, 5}));
}

}  // namespace
}  // namespace tessera::kv
