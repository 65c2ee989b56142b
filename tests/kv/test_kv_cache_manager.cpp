// KvCacheManager with small pools: exact block ids, free-queue order, hits, CoW and ref counts
// after every operation, with check_integrity() after each.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_seq.h"

namespace tessera::kv {
namespace {

using kvtest::iota;
using kvtest::TestSeq;
using kvtest::V;

V table(const KvCacheManager& kv, int64_t id) {
  auto t = kv.block_table(id);
  return V(t.begin(), t.end());
}

TEST(KvCacheManager, AllocatesOnDemandAndFreesTailFirst) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s(1, iota(6, 0), 4);
  PrefixHit hit = kv.get_computed_blocks(s.view());
  EXPECT_EQ(hit.num_tokens, 0);
  auto a = kv.allocate_slots(1, 0, 6, &hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{1, 2}));
  kv.check_integrity();
  a = kv.allocate_slots(1, 6, 1);  // 7 slots: still two blocks
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->new_block_ids.empty());
  a = kv.allocate_slots(1, 7, 2);  // 9 slots: a third block, waste 3 < block_size
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{3}));
  EXPECT_EQ(table(kv, 1), (V{1, 2, 3}));
  kv.check_integrity();
  kv.free(1);
  EXPECT_EQ(kv.pool().free_queue_order(), (V{4, 5, 6, 7, 8, 9, 10, 3, 2, 1}));
  EXPECT_FALSE(kv.contains(1));
  kv.check_integrity();
}

TEST(KvCacheManager, NotNowChangesNothing) {
  KvCacheManager kv({.num_blocks = 5, .block_size = 4, .enable_prefix_caching = true});
  ASSERT_TRUE(kv.allocate_slots(1, 0, 12));
  EXPECT_EQ(kv.num_free_blocks(), 1);
  EXPECT_FALSE(kv.allocate_slots(2, 0, 8));
  EXPECT_FALSE(kv.contains(2));
  EXPECT_FALSE(kv.allocate_slots(1, 12, 5));  // needs 2 more, 1 free
  EXPECT_EQ(table(kv, 1), (V{1, 2, 3}));
  EXPECT_EQ(kv.num_free_blocks(), 1);
  kv.check_integrity();
}

TEST(KvCacheManager, PrefixHitReusesTheLongestChain) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s1(1, iota(10, 0), 4);
  PrefixHit hit = kv.get_computed_blocks(s1.view());
  ASSERT_TRUE(kv.allocate_slots(1, 0, 10, &hit));
  kv.cache_blocks(s1.view(), 10);  // blocks 1 and 2 are full; 3 is partial, never cached
  kv.free(1);
  EXPECT_EQ(kv.pool().free_queue_order(), (V{4, 5, 6, 7, 8, 9, 10, 3, 2, 1}));
  KvCacheStats st = kv.stats();
  EXPECT_EQ(st.num_blocks_cached, 2);
  EXPECT_EQ(st.num_blocks_free, 8);
  EXPECT_EQ(st.num_blocks_used, 0);

  V t2 = iota(8, 0);
  t2.insert(t2.end(), {100, 101, 102});
  TestSeq s2(2, t2, 4);
  hit = kv.get_computed_blocks(s2.view());
  EXPECT_EQ(hit.block_ids, (V{1, 2}));
  EXPECT_EQ(hit.num_tokens, 8);
  auto a = kv.allocate_slots(2, 8, 3, &hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{4}));
  EXPECT_EQ(table(kv, 2), (V{1, 2, 4}));
  EXPECT_EQ(kv.pool().free_queue_order(), (V{5, 6, 7, 8, 9, 10, 3}));
  st = kv.stats();
  EXPECT_EQ(st.prefix_query_tokens, 10 + 11);
  EXPECT_EQ(st.prefix_hit_tokens, 8);
  kv.check_integrity();

  // Exactly two blocks of prompt: the hit stops one block short so the last token is computed.
  TestSeq s3(3, iota(8, 0), 4);
  hit = kv.get_computed_blocks(s3.view());
  EXPECT_EQ(hit.block_ids, (V{1}));
  ASSERT_TRUE(kv.allocate_slots(3, 4, 4, &hit));
  EXPECT_EQ(table(kv, 3), (V{1, 5}));
  EXPECT_EQ(kv.pool().block(1).ref_cnt, 2);
  EXPECT_EQ(kv.pool().block(2).ref_cnt, 1);
  kv.check_integrity();
}

TEST(KvCacheManager, EvictionTakesTheTailOfAChainFirst) {
  KvCacheManager kv({.num_blocks = 7, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s1(1, iota(9, 0), 4);
  PrefixHit hit = kv.get_computed_blocks(s1.view());
  ASSERT_TRUE(kv.allocate_slots(1, 0, 9, &hit));
  EXPECT_EQ(table(kv, 1), (V{1, 2, 3}));
  kv.cache_blocks(s1.view(), 9);
  kv.free(1);
  EXPECT_EQ(kv.pool().free_queue_order(), (V{4, 5, 6, 3, 2, 1}));
  ASSERT_TRUE(kv.allocate_slots(2, 0, 16));  // 4, 5, 6, 3: no cached block touched
  EXPECT_EQ(table(kv, 2), (V{4, 5, 6, 3}));
  EXPECT_EQ(kv.stats().num_evictions, 0);
  ASSERT_TRUE(kv.allocate_slots(3, 0, 4));  // evicts 2, the chain's tail
  EXPECT_EQ(table(kv, 3), (V{2}));
  EXPECT_EQ(kv.stats().num_evictions, 1);
  kv.check_integrity();

  TestSeq s4(4, iota(9, 0), 4);
  hit = kv.get_computed_blocks(s4.view());
  EXPECT_EQ(hit.block_ids, (V{1}));  // block 2 is gone, block 1 still serves
  EXPECT_FALSE(kv.allocate_slots(4, 4, 5, &hit));  // hit block 1 + 2 new > 1 free
  kv.free(2);
  EXPECT_EQ(kv.pool().free_queue_order(), (V{1, 3, 6, 5, 4}));
  auto a = kv.allocate_slots(4, 4, 5, &hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{3, 6}));
  EXPECT_EQ(table(kv, 4), (V{1, 3, 6}));
  EXPECT_EQ(kv.pool().free_queue_order(), (V{5, 4}));
  kv.check_integrity();
}

TEST(KvCacheManager, ForkSharesBlocksAndCopiesOnWrite) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  ASSERT_TRUE(kv.allocate_slots(1, 0, 6));  // [1, 2], block 2 half full
  kv.fork(1, 2);
  EXPECT_EQ(table(kv, 2), (V{1, 2}));
  EXPECT_EQ(kv.pool().block(1).ref_cnt, 2);
  EXPECT_EQ(kv.pool().block(2).ref_cnt, 2);
  kv.check_integrity();

  auto a = kv.allocate_slots(1, 6, 1);  // writes into shared block 2: copy it first
  ASSERT_TRUE(a);
  ASSERT_EQ(a->cow_copies.size(), 1u);
  EXPECT_EQ(a->cow_copies[0].src_block, 2);
  EXPECT_EQ(a->cow_copies[0].dst_block, 3);
  EXPECT_TRUE(a->new_block_ids.empty());
  EXPECT_EQ(table(kv, 1), (V{1, 3}));
  EXPECT_EQ(kv.pool().block(1).ref_cnt, 2);
  EXPECT_EQ(kv.pool().block(2).ref_cnt, 1);
  EXPECT_EQ(kv.pool().block(3).ref_cnt, 1);
  kv.check_integrity();

  a = kv.allocate_slots(2, 6, 1);  // block 2 is now the child's alone: no copy
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->cow_copies.empty());
  a = kv.allocate_slots(2, 7, 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{4}));
  EXPECT_EQ(table(kv, 2), (V{1, 2, 4}));
  EXPECT_EQ(kv.stats().num_cow_copies, 1);
  kv.check_integrity();
  kv.free(1);
  EXPECT_EQ(kv.pool().block(1).ref_cnt, 1);
  kv.free(2);
  EXPECT_EQ(kv.stats().num_blocks_used, 0);
  kv.check_integrity();
}

TEST(KvCacheManager, ForkOnABlockBoundaryNeedsNoCopy) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = false});
  ASSERT_TRUE(kv.allocate_slots(1, 0, 8));
  kv.fork(1, 2);
  kv.fork(1, 3);
  EXPECT_EQ(kv.pool().block(2).ref_cnt, 3);
  for (int64_t id : {1, 2, 3}) {
    auto a = kv.allocate_slots(id, 8, 1);
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->cow_copies.empty());
    EXPECT_EQ(a->new_block_ids.size(), 1u);
  }
  EXPECT_EQ(table(kv, 3), (V{1, 2, 5}));
  kv.check_integrity();
}

TEST(KvCacheManager, CopyNeedsAFreeBlock) {
  KvCacheManager kv({.num_blocks = 3, .block_size = 4, .enable_prefix_caching = false});
  ASSERT_TRUE(kv.allocate_slots(1, 0, 6));  // [1, 2]: pool exhausted
  kv.fork(1, 2);
  EXPECT_FALSE(kv.allocate_slots(1, 6, 1));  // the copy has nowhere to go: "not now"
  EXPECT_EQ(table(kv, 1), (V{1, 2}));
  kv.free(2);
  auto a = kv.allocate_slots(1, 6, 1);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->cow_copies.empty());
  kv.check_integrity();
}

TEST(KvCacheManager, TruncateReleasesRejectedDraftSlots) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  ASSERT_TRUE(kv.allocate_slots(1, 0, 5));  // [1, 2]
  ASSERT_TRUE(kv.allocate_slots(1, 5, 4));  // 1 real + 3 draft tokens: [1, 2, 3]
  kv.truncate(1, 6);                        // 1 draft accepted: 6 positions hold real KV
  EXPECT_EQ(table(kv, 1), (V{1, 2}));
  EXPECT_EQ(kv.pool().free_queue_order().back(), 3);
  kv.check_integrity();
}

TEST(KvCacheManager, DraftTokensAreNeverCached) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq s(1, iota(6, 0), 4);  // the request knows 6 tokens; 3 drafts follow
  PrefixHit hit = kv.get_computed_blocks(s.view());
  ASSERT_TRUE(kv.allocate_slots(1, 0, 9, &hit));
  kv.cache_blocks(s.view(), 9);  // only tokens the request knows count: block 1 only
  EXPECT_TRUE(kv.pool().block(1).has_hash);
  EXPECT_FALSE(kv.pool().block(2).has_hash);
  kv.check_integrity();
}

TEST(KvCacheManager, CacheSaltIsolatesTenants) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = true});
  TestSeq a(1, iota(9, 0), 4, hash_cache_salt("tenant-a"));
  PrefixHit hit = kv.get_computed_blocks(a.view());
  ASSERT_TRUE(kv.allocate_slots(1, 0, 9, &hit));
  kv.cache_blocks(a.view(), 9);
  TestSeq b(2, iota(9, 0), 4, hash_cache_salt("tenant-b"));
  EXPECT_EQ(kv.get_computed_blocks(b.view()).num_tokens, 0);
  TestSeq c(3, iota(9, 0), 4);
  EXPECT_EQ(kv.get_computed_blocks(c.view()).num_tokens, 0);
  TestSeq a2(4, iota(9, 0), 4, hash_cache_salt("tenant-a"));
  EXPECT_EQ(kv.get_computed_blocks(a2.view()).num_tokens, 8);
  EXPECT_NE(a.hashes[0], c.hashes[0]);
  EXPECT_NE(a.hashes[1], c.hashes[1]);  // the salt flows down the chain
  kv.check_integrity();
}

TEST(KvCacheManager, PrefixCachingOffNeverHits) {
  KvCacheManager kv({.num_blocks = 11, .block_size = 4, .enable_prefix_caching = false});
  TestSeq s(1, iota(9, 0), 4);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 9));
  kv.cache_blocks(s.view(), 9);
  kv.free(1);
  TestSeq s2(2, iota(9, 0), 4);
  EXPECT_EQ(kv.get_computed_blocks(s2.view()).num_tokens, 0);
  EXPECT_EQ(kv.stats().num_blocks_cached, 0);
  kv.check_integrity();
}

TEST(BlockHash, IncrementalHashesEqualOneShotHashes) {
  V tokens = iota(11, 3);
  std::vector<BlockHash> incremental, one_shot;
  for (size_t n = 0; n <= tokens.size(); ++n) {
    extend_block_hashes(incremental, std::span<const int32_t>(tokens).first(n), 4, 0);
  }
  extend_block_hashes(one_shot, tokens, 4, 0);
  EXPECT_EQ(incremental.size(), 2u);
  EXPECT_EQ(incremental, one_shot);
  EXPECT_EQ(one_shot[1], hash_block_tokens(one_shot[0], std::span<const int32_t>(tokens).subspan(4, 4), 0));
}

// A sequence held as prompt + output pieces (TokenRun) hashes, hits and caches exactly as the same
// tokens in one vector, wherever the pieces meet (inside a block or on its edge).
TEST(BlockHash, TwoPiecesHashAndHitAsOneVector) {
  const V tokens = iota(14, 3);
  std::vector<BlockHash> whole;
  extend_block_hashes(whole, tokens, 4, 7);
  for (size_t split = 0; split <= tokens.size(); ++split) {
    const std::span<const int32_t> all(tokens);
    const TokenRun run(all.first(split), all.subspan(split));
    std::vector<BlockHash> pieces;
    extend_block_hashes(pieces, run, 4, 7);
    EXPECT_EQ(pieces, whole) << "split " << split;
    std::vector<int32_t> scratch;
    for (size_t b = 0; b < 3; ++b) {
      const auto r = run.range(b * 4, 4, scratch);
      EXPECT_EQ(V(r.begin(), r.end()), V(tokens.begin() + b * 4, tokens.begin() + b * 4 + 4)) << split;
    }
  }
  KvCacheManager kv({.num_blocks = 9, .block_size = 4, .enable_prefix_caching = true});
  TestSeq a(1, tokens, 4, 7);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 14, nullptr));
  kv.cache_blocks(a.view(), 14);  // 3 full blocks
  const std::span<const int32_t> all(tokens);
  const SeqTokens b{2, TokenRun(all.first(6), all.subspan(6)), whole, 7};
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 12);
  kv.check_integrity();
}

}  // namespace
}  // namespace tessera::kv
