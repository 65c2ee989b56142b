// BlockPool: ref counts, eviction of cached blocks, verified hash hits, integrity counts.
#include <gtest/gtest.h>

#include "kv/block_pool.h"

namespace tessera::kv {
namespace {

using V = std::vector<int32_t>;

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(5, 4, true);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.free_queue_order(), (V{1, 2, 3, 4}));
  EXPECT_EQ(pool.get_new_blocks(4), (V{1, 2, 3, 4}));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  const BlockPoolCounts c = pool.check_integrity();
  EXPECT_EQ(c.num_used, 4);
  EXPECT_EQ(c.num_free + c.num_cached, 0);
}

TEST(BlockPool, RefCountsAndFreeOrder) {
  BlockPool pool(9, 4, true);
  V a = pool.get_new_blocks(3);  // 1 2 3
  EXPECT_EQ(a, (V{1, 2, 3}));
  pool.touch(V{2});
  EXPECT_EQ(pool.block(2).ref_cnt, 2);
  pool.free_blocks(V{3, 2, 1});  // 2 still held once
  EXPECT_EQ(pool.free_queue_order(), (V{4, 5, 6, 7, 8, 3, 1}));
  EXPECT_EQ(pool.block(2).ref_cnt, 1);
  pool.touch(V{1});  // taken back from the middle of the queue
  EXPECT_EQ(pool.free_queue_order(), (V{4, 5, 6, 7, 8, 3}));
  const BlockPoolCounts c = pool.check_integrity();
  EXPECT_EQ(c.num_used, 2);
  EXPECT_EQ(c.num_free, 6);
  EXPECT_EQ(c.num_cached, 0);
}

TEST(BlockPool, CachedBlocksAreEvictedFromTheFront) {
  BlockPool pool(4, 2, true);  // blocks 1..3
  V ids = pool.get_new_blocks(2);  // 1 2
  const V t1{10, 11}, t2{12, 13};
  pool.cache_full_block(1, 111, t1, kNoParentBlock, 0);
  pool.cache_full_block(2, 222, t2, 1, 0);
  pool.free_blocks(V{2, 1});  // tail first
  EXPECT_EQ(pool.free_queue_order(), (V{3, 2, 1}));
  BlockPoolCounts c = pool.check_integrity();
  EXPECT_EQ(c.num_cached, 2);
  EXPECT_EQ(c.num_free, 1);
  EXPECT_EQ(pool.find_cached_block(111, t1, kNoParentBlock, 0), 1);
  EXPECT_EQ(pool.find_cached_block(222, t2, 1, 0), 2);
  EXPECT_EQ(pool.get_new_blocks(2), (V{3, 2}));  // 2 (the chain's tail) is evicted first
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.find_cached_block(222, t2, 1, 0), std::nullopt);
  EXPECT_EQ(pool.find_cached_block(111, t1, kNoParentBlock, 0), 1);
  c = pool.check_integrity();
  EXPECT_EQ(c.num_cached, 1);
  EXPECT_EQ(c.num_used, 2);
}

TEST(BlockPool, HashCollisionIsRejectedByTokenComparison) {
  BlockPool pool(4, 2, true);
  pool.get_new_blocks(1);  // 1
  const V tokens{7, 8}, other{7, 9};
  pool.cache_full_block(1, 0xabc, tokens, kNoParentBlock, 0);
  EXPECT_EQ(pool.find_cached_block(0xabc, other, kNoParentBlock, 0), std::nullopt);
  EXPECT_EQ(pool.num_hash_collisions(), 1);
  EXPECT_EQ(pool.find_cached_block(0xabc, tokens, kNoParentBlock, 5), std::nullopt);  // other salt
  EXPECT_EQ(pool.find_cached_block(0xabc, tokens, kNoParentBlock, 0), 1);
  pool.check_integrity();
}

TEST(BlockPool, ChildOfAnEvictedParentDoesNotMatch) {
  BlockPool pool(4, 1, true);  // blocks 1..3, one token each
  pool.get_new_blocks(2);      // 1 2
  pool.cache_full_block(1, 100, V{5}, kNoParentBlock, 0);
  pool.cache_full_block(2, 200, V{6}, 1, 0);
  pool.free_blocks(V{1});      // parent first, child still held
  pool.free_blocks(V{2});
  EXPECT_EQ(pool.free_queue_order(), (V{3, 1, 2}));
  pool.get_new_blocks(2);      // 3, then 1 (evicted, generation bumped)
  pool.cache_full_block(1, 100, V{5}, kNoParentBlock, 0);  // same content re-cached in block 1
  // Block 2 recorded parent 1 of the previous generation: the chain is no longer verified.
  EXPECT_EQ(pool.find_cached_block(200, V{6}, 1, 0), std::nullopt);
  pool.check_integrity();
}

TEST(BlockPool, ResetPrefixCacheOnlyWhenIdle) {
  BlockPool pool(4, 1, true);
  pool.get_new_blocks(1);
  pool.cache_full_block(1, 9, V{3}, kNoParentBlock, 0);
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free_blocks(V{1});
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.find_cached_block(9, V{3}, kNoParentBlock, 0), std::nullopt);
  EXPECT_EQ(pool.check_integrity().num_cached, 0);
}

TEST(BlockPool, CachingOffStoresNothing) {
  BlockPool pool(4, 1, false);
  pool.get_new_blocks(1);
  pool.cache_full_block(1, 9, V{3}, kNoParentBlock, 0);
  EXPECT_FALSE(pool.block(1).has_hash);
  EXPECT_EQ(pool.find_cached_block(9, V{3}, kNoParentBlock, 0), std::nullopt);
  pool.check_integrity();
}

}  // namespace
}  // namespace tessera::kv
