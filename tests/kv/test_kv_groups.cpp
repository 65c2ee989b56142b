// KV-cache groups, scripted: one full group and one sliding group (W = 32, block_size 16) sharing a
// pool. Exact block ids held and released at each step, free-queue order, prefix hits under the
// window condition (hit and miss), CoW after fork in both groups, all-or-nothing allocation when
// the pool is short, kv_blocks_held against the manager, and check_integrity() after every step.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/kv_cache_manager.h"
#include "kv/kv_plan.h"

namespace tessera::kv {
namespace {

using V = std::vector<int32_t>;
constexpr int32_t kBs = 16;
const V kWindows = {0, 32};

struct Seq {
  int64_t id;
  V tokens;
  std::vector<BlockHash> hashes;
  Seq(int64_t seq_id, V t) : id(seq_id), tokens(std::move(t)) { extend_block_hashes(hashes, tokens, kBs, 0); }
  SeqTokens view() const { return {id, tokens, hashes, 0}; }
};

V iota(int32_t n, int32_t start) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

KvCacheConfig two_groups(int32_t num_blocks) {
  return {.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = true,
          .groups = {{.sliding_window = 0}, {.sliding_window = 32}}};
}

V table(const KvCacheManager& kv, int64_t id, int32_t g) {
  auto t = kv.block_table(id, g);
  return V(t.begin(), t.end());
}

V hit_of(const KvCacheManager& kv, const PrefixHit& hit, int32_t g) {
  auto t = kv.hit_blocks(hit, g);
  return V(t.begin(), t.end());
}

// allocate + write + cache, as the scheduler does around one step; checks the plan's count.
std::optional<SlotAllocation> step(KvCacheManager& kv, const Seq& s, int32_t computed, int32_t n,
                                   const PrefixHit* hit = nullptr) {
  auto a = kv.allocate_slots(s.id, computed, n, hit);
  kv.check_integrity();
  if (!a) return a;
  EXPECT_EQ(kv.num_blocks_held(s.id), kv_blocks_held(kWindows, kBs, computed, computed + n));
  kv.cache_blocks(s.view(), computed + n);
  kv.check_integrity();
  return a;
}

TEST(KvCacheGroups, SlidingGroupReleasesBlocksBehindTheWindow) {
  KvCacheManager kv(two_groups(16));
  Seq s(1, iota(81, 100));
  auto a = step(kv, s, 0, 40);  // positions [0, 40): 3 blocks per group
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{1, 2, 3, 4, 5, 6}));  // group 0's, then group 1's
  a = step(kv, s, 40, 24);  // [0, 64); release bound max(0, 40 - 31) / 16 = 0
  ASSERT_TRUE(a);
  EXPECT_EQ(table(kv, 1, 0), (V{1, 2, 3, 7}));
  EXPECT_EQ(table(kv, 1, 1), (V{4, 5, 6, 8}));
  a = step(kv, s, 64, 1);  // a query at 64 sees (32, 64]: blocks [0, 16) and [16, 32) go back
  ASSERT_TRUE(a);
  EXPECT_EQ(table(kv, 1, 0), (V{1, 2, 3, 7, 9}));
  EXPECT_EQ(table(kv, 1, 1), (V{0, 0, 6, 8, 10}));
  EXPECT_EQ(kv.pool().free_queue_order(), (V{11, 12, 13, 14, 15, 5, 4}));  // tail first, at the back
  EXPECT_TRUE(kv.pool().block(4).has_hash && kv.pool().block(5).has_hash);  // cached until evicted
  for (int32_t c = 65; c < 80; ++c) ASSERT_TRUE(step(kv, s, c, 1));  // 79 - 31 = 48: block 6 goes
  EXPECT_EQ(table(kv, 1, 1), (V{0, 0, 0, 8, 10}));
  EXPECT_EQ(kv.pool().free_queue_order(), (V{11, 12, 13, 14, 15, 5, 4, 6}));
  const KvCacheStats st = kv.stats();
  EXPECT_EQ(st.group_blocks_used, (V{5, 2}));
  EXPECT_EQ(st.num_window_releases, 3);
  EXPECT_EQ(st.num_blocks_used, 7);
  kv.free(1);  // group by group, each tail first
  EXPECT_EQ(kv.pool().free_queue_order(), (V{11, 12, 13, 14, 15, 5, 4, 6, 9, 7, 3, 2, 1, 10, 8}));
  kv.check_integrity();
}

// Runs sequence 1 (81 tokens) to 80 computed and frees it: group 0 cached [1 2 3 7 9], group 1
// cached [4 5 6 8 10]; queue 11..15 5 4 6 9 7 3 2 1 10 8.
void run_and_free_first(KvCacheManager& kv, const Seq& s) {
  ASSERT_TRUE(step(kv, s, 0, 40));
  ASSERT_TRUE(step(kv, s, 40, 24));
  for (int32_t c = 64; c < 80; ++c) ASSERT_TRUE(step(kv, s, c, 1));
  kv.free(1);
  kv.check_integrity();
}

TEST(KvCacheGroups, PrefixHitNeedsOnlyTheWindowInASlidingGroup) {
  KvCacheManager kv(two_groups(16));
  const Seq s1(1, iota(81, 100));
  run_and_free_first(kv, s1);
  // Each group finds only its own blocks: the group salt separates equal tokens and hashes.
  EXPECT_EQ(kv.pool().find_cached_block(s1.hashes[0], V(s1.tokens.begin(), s1.tokens.begin() + kBs),
                                        kNoParentBlock, 0),
            1);
  EXPECT_EQ(kv.pool().find_cached_block(group_key(s1.hashes[0], 1),
                                        V(s1.tokens.begin(), s1.tokens.begin() + kBs), kNoParentBlock,
                                        group_key(0, 1)),
            4);
  Seq s2(2, iota(81, 100));
  PrefixHit hit = kv.get_computed_blocks(s2.view());
  EXPECT_EQ(hit.num_tokens, 80);
  EXPECT_EQ(hit_of(kv, hit, 0), (V{1, 2, 3, 7, 9}));
  EXPECT_EQ(hit_of(kv, hit, 1), (V{0, 0, 0, 8, 10}));  // the window (49, 80] is blocks 3 and 4

  // Evict group 1's blocks 5 4 6 (and group 0's nothing cached): 8 blocks for sequence 3.
  Seq s3(3, iota(64, 5000));
  auto a = step(kv, s3, 0, 64);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{11, 12, 13, 14, 15, 5, 4, 6}));
  // Hit: block 8's parent (6) was evicted, so block 8 is verified by hash + tokens + group key.
  hit = kv.get_computed_blocks(s2.view());
  EXPECT_EQ(hit.num_tokens, 80);
  EXPECT_EQ(hit_of(kv, hit, 1), (V{0, 0, 0, 8, 10}));
  // Sequence 3 gives its blocks back (queue 9 7 3 2 1 10 8 14 13 12 11 6 4 5 15); the hit takes
  // its own seven out of the queue, so the new pair is 14 and 13.
  kv.free(3);
  a = step(kv, s2, 80, 1, &hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{14, 13}));
  EXPECT_EQ(table(kv, 2, 0), (V{1, 2, 3, 7, 9, 14}));
  EXPECT_EQ(table(kv, 2, 1), (V{0, 0, 0, 8, 10, 13}));
  kv.free(2);
  kv.check_integrity();

  // Miss: the first 64 tokens match, so group 0 has [0, 64) cached, but group 1's window for
  // L = 64 (blocks 2, 3) lost block 6 (now sequence 3's); shorter L need blocks 0..2, all
  // reused by sequence 3: no hit at all.
  V t4 = iota(64, 100);
  for (int32_t i = 0; i < 17; ++i) t4.push_back(9000 + i);
  Seq s4(4, t4);
  hit = kv.get_computed_blocks(s4.view());
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_TRUE(hit.block_ids.empty());
}

TEST(KvCacheGroups, HitShrinksToTheLongestLengthEveryWindowCovers) {
  KvCacheManager kv(two_groups(16));
  const Seq s1(1, iota(81, 100));
  run_and_free_first(kv, s1);
  // Sequence 5 (33 tokens) hits [0, 32) in both groups and holds 1 2 | 4 5; its new pair is 11 12.
  Seq s5(5, iota(33, 100));
  PrefixHit hit = kv.get_computed_blocks(s5.view());
  EXPECT_EQ(hit.num_tokens, 32);
  EXPECT_EQ(hit_of(kv, hit, 1), (V{4, 5}));  // (1, 32] needs both blocks
  auto a = step(kv, s5, 32, 1, &hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{11, 12}));
  // Sequence 3 takes 13 14 15 | 6 9 7: group 1 loses block 6 ([32, 48)), group 0 loses 7 and 9.
  Seq s3(3, iota(48, 5000));
  a = step(kv, s3, 0, 48);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{13, 14, 15, 6, 9, 7}));
  // Group 0 still has [0, 48); L = 48 needs group 1's [16, 48) (blocks 5, 6): 6 is gone, so the
  // hit shrinks to L = 32, whose window (1, 32] is blocks 4 and 5.
  Seq s2(2, iota(81, 100));
  hit = kv.get_computed_blocks(s2.view());
  EXPECT_EQ(hit.num_tokens, 32);
  EXPECT_EQ(hit_of(kv, hit, 0), (V{1, 2}));
  EXPECT_EQ(hit_of(kv, hit, 1), (V{4, 5}));
  ASSERT_TRUE(step(kv, s2, 32, 16, &hit));
  EXPECT_EQ(kv.pool().block(4).ref_cnt, 2);  // shared with sequence 5
}

TEST(KvCacheGroups, CopyOnWriteAfterForkInBothGroups) {
  KvCacheManager kv(two_groups(16));
  Seq s(1, iota(41, 100));
  ASSERT_TRUE(step(kv, s, 0, 40));  // [1 2 3] [4 5 6]
  kv.fork(1, 2);
  kv.check_integrity();
  EXPECT_EQ(kv.pool().block(3).ref_cnt, 2);
  EXPECT_EQ(kv.pool().block(6).ref_cnt, 2);
  Seq c(2, iota(41, 100));
  auto a = step(kv, c, 40, 1);  // writes position 40, in the shared last block of each group
  ASSERT_TRUE(a);
  ASSERT_EQ(a->cow_copies.size(), 2u);
  EXPECT_EQ(a->cow_copies[0].src_block, 3);
  EXPECT_EQ(a->cow_copies[0].dst_block, 7);
  EXPECT_EQ(a->cow_copies[0].group, 0);
  EXPECT_EQ(a->cow_copies[1].src_block, 6);
  EXPECT_EQ(a->cow_copies[1].dst_block, 8);
  EXPECT_EQ(a->cow_copies[1].group, 1);
  EXPECT_EQ(table(kv, 2, 0), (V{1, 2, 7}));
  EXPECT_EQ(table(kv, 2, 1), (V{4, 5, 8}));
  EXPECT_EQ(table(kv, 1, 1), (V{4, 5, 6}));
  EXPECT_EQ(kv.pool().block(6).ref_cnt, 1);
  EXPECT_EQ(kv.stats().num_cow_copies, 2);
  // Past the window the child releases its own references only.
  for (int32_t p = 41; p < 64; ++p) ASSERT_TRUE(step(kv, c, p, 1));
  ASSERT_TRUE(step(kv, c, 64, 1));
  EXPECT_EQ(table(kv, 2, 1)[0], kNullBlockId);
  EXPECT_EQ(kv.pool().block(4).ref_cnt, 1);  // still the parent's
  EXPECT_EQ(table(kv, 1, 1), (V{4, 5, 6}));
  kv.free(1);
  kv.free(2);
  kv.check_integrity();
  EXPECT_EQ(kv.stats().num_blocks_used, 0);
}

TEST(KvCacheGroups, AllocationIsAllOrNothingAcrossGroups) {
  KvCacheManager kv(two_groups(8));  // 7 usable blocks
  Seq s(1, iota(80, 100));
  ASSERT_TRUE(step(kv, s, 0, 48));  // [1 2 3] [4 5 6], queue [7]
  // [0, 65) needs 2 more per group = 4; 1 free + 1 the window gives back (block 4) = 2: refused.
  EXPECT_FALSE(kv.allocate_slots(1, 48, 17));
  kv.check_integrity();
  EXPECT_EQ(table(kv, 1, 1), (V{4, 5, 6}));  // nothing changed, the release included
  EXPECT_EQ(kv.pool().free_queue_order(), (V{7}));
  // [0, 64) needs 1 per group: block 7 and the released block 4 (its hash evicted) serve.
  auto a = step(kv, s, 48, 16);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->new_block_ids, (V{7, 4}));
  EXPECT_EQ(table(kv, 1, 0), (V{1, 2, 3, 7}));
  EXPECT_EQ(table(kv, 1, 1), (V{0, 5, 6, 4}));
  EXPECT_EQ(kv.stats().num_evictions, 1);
}

TEST(KvCacheGroups, TruncateKeepsTheWindowAndDefaultConfigIsOneFullGroup) {
  KvCacheManager kv(two_groups(16));
  Seq s(1, iota(100, 100));
  ASSERT_TRUE(step(kv, s, 0, 64));
  ASSERT_TRUE(step(kv, s, 64, 5));  // 4 drafts past 65; group 1 released [0, 32)
  kv.truncate(1, 66);               // 2 accepted: 5 blocks kept, nothing to drop
  kv.truncate(1, 64);               // drop block 4 of each group
  kv.check_integrity();
  EXPECT_EQ(table(kv, 1, 1), (V{0, 0, 7, 8}));
  EXPECT_DEATH(kv.truncate(1, 20), "released");

  KvCacheManager one({.num_blocks = 8, .block_size = kBs, .enable_prefix_caching = true});
  EXPECT_EQ(one.num_groups(), 1);
  EXPECT_EQ(one.sliding_window(0), 0);
  EXPECT_EQ(kv_blocks_held(V{0}, kBs, 0, 33), 3);
  EXPECT_EQ(kv_blocks_held(kWindows, kBs, 79, 80), 5 + 2);
}

}  // namespace
}  // namespace tessera::kv
