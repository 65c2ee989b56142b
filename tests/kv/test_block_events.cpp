// The prefix cache's own event record (kv/block_events.h): exactly which blocks entered and left
// the hash map, in order, on scripted allocate / cache / free / evict / reset sequences.
#include <gtest/gtest.h>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace tessera::kv {
namespace {

using V = std::vector<int32_t>;

void expect_stored(const BlockEvent& e, int32_t block_id, BlockHash hash, std::optional<BlockHash> parent,
                   const V& tokens) {
  EXPECT_EQ(e.kind, BlockEventKind::kStored);
  EXPECT_EQ(e.block_id, block_id);
  EXPECT_EQ(e.hash, hash);
  EXPECT_EQ(e.has_parent, parent.has_value());
  if (parent) {
    EXPECT_EQ(e.parent_hash, *parent);
  }
  EXPECT_EQ(e.token_ids, tokens);
}

void expect_removed(const BlockEvent& e, int32_t block_id, BlockHash hash) {
  EXPECT_EQ(e.kind, BlockEventKind::kRemoved);
  EXPECT_EQ(e.block_id, block_id);
  EXPECT_EQ(e.hash, hash);
  EXPECT_TRUE(e.token_ids.empty());
}

TEST(BlockEvents, PoolRecordsStoreEvictAndReset) {
  BlockPool pool(5, 2, true);  // blocks 1..4 of 2 tokens
  pool.set_record_events(true);
  EXPECT_EQ(pool.get_new_blocks(3), (V{1, 2, 3}));
  EXPECT_TRUE(pool.drain_events().empty());  // allocating free blocks changes no cache entry
  pool.cache_full_block(1, 111, V{10, 11}, kNoParentBlock, 0);
  pool.cache_full_block(2, 222, V{12, 13}, 1, 0);
  pool.cache_full_block(2, 222, V{12, 13}, 1, 0);  // already cached: no second record
  std::vector<BlockEvent> ev = pool.drain_events();
  ASSERT_EQ(ev.size(), 2u);
  expect_stored(ev[0], 1, 111, std::nullopt, V{10, 11});
  expect_stored(ev[1], 2, 222, 111, V{12, 13});
  EXPECT_TRUE(pool.drain_events().empty());  // drained

  pool.free_blocks(V{3, 2, 1});  // tail first: queue 4 3 2 1; freeing keeps the hashes
  EXPECT_TRUE(pool.drain_events().empty());
  EXPECT_EQ(pool.get_new_blocks(3), (V{4, 3, 2}));  // 2 (the chain's tail) is evicted
  ev = pool.drain_events();
  ASSERT_EQ(ev.size(), 1u);
  expect_removed(ev[0], 2, 222);

  pool.free_blocks(V{2, 3, 4});
  EXPECT_TRUE(pool.reset_prefix_cache());  // block 1 still cached: one AllCleared, no removes
  ev = pool.drain_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, BlockEventKind::kAllCleared);
  pool.check_integrity();
}

TEST(BlockEvents, NothingRecordedUnlessEnabled) {
  BlockPool pool(4, 2, true);
  pool.get_new_blocks(2);
  pool.cache_full_block(1, 111, V{1, 2}, kNoParentBlock, 0);
  pool.free_blocks(V{2, 1});
  pool.get_new_blocks(3);  // evicts block 1
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_TRUE(pool.drain_events().empty());

  BlockPool off(4, 2, false);  // caching off: nothing is ever cached, so nothing is recorded
  off.set_record_events(true);
  off.get_new_blocks(1);
  off.cache_full_block(1, 111, V{1, 2}, kNoParentBlock, 0);
  EXPECT_TRUE(off.drain_events().empty());
}

SeqTokens view(int64_t id, const V& tokens, std::vector<BlockHash>& hashes, int32_t bs) {
  extend_block_hashes(hashes, tokens, bs, 0);
  return {.seq_id = id, .token_ids = tokens, .block_hashes = hashes, .extra_key = 0};
}

// Through the scheduler's entry point with real chained hashes: two prompts sharing a block, a
// prefix hit that stores nothing new, and an eviction of the LRU tail.
TEST(BlockEvents, ManagerScriptedSequence) {
  KvCacheManager kv({.num_blocks = 6, .block_size = 4, .enable_prefix_caching = true,
                     .record_block_events = true});  // blocks 1..5
  const V a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};            // 2 full blocks + 2 tokens
  std::vector<BlockHash> ha;
  const SeqTokens va = view(1, a, ha, 4);
  PrefixHit hit = kv.get_computed_blocks(va);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 10, &hit).has_value());
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  const V table_a(kv.block_table(1).begin(), kv.block_table(1).end());
  EXPECT_EQ(table_a, (V{1, 2, 3}));
  kv.cache_blocks(va, 10);
  std::vector<BlockEvent> ev = kv.drain_block_events();
  ASSERT_EQ(ev.size(), 2u);
  expect_stored(ev[0], 1, ha[0], std::nullopt, V{1, 2, 3, 4});
  expect_stored(ev[1], 2, ha[1], ha[0], V{5, 6, 7, 8});

  // b shares a's first block: a prefix hit (no record), then its own second block.
  const V b{1, 2, 3, 4, 50, 51, 52, 53, 54};
  std::vector<BlockHash> hb;
  const SeqTokens vb = view(2, b, hb, 4);
  EXPECT_EQ(hb[0], ha[0]);
  hit = kv.get_computed_blocks(vb);
  EXPECT_EQ(hit.block_ids, (V{1}));
  ASSERT_TRUE(kv.allocate_slots(2, 4, 5, &hit).has_value());
  const V table_b(kv.block_table(2).begin(), kv.block_table(2).end());
  EXPECT_EQ(table_b, (V{1, 4, 5}));
  kv.cache_blocks(vb, 9);
  ev = kv.drain_block_events();
  ASSERT_EQ(ev.size(), 1u);
  expect_stored(ev[0], 4, hb[1], ha[0], V{50, 51, 52, 53});

  // Both finish, tail first: the queue is 3 2 5 4 1 (block 1 last: b held it after a). A new
  // 16-token prompt takes the front four: 3 and 5 held partial blocks (never cached), 2 and 4
  // cached ones, whose hashes are removed in that order.
  kv.free(1);  // frees 3, 2, 1(ref 2 -> 1)
  kv.free(2);  // frees 5, 4, 1
  EXPECT_TRUE(kv.drain_block_events().empty());
  const V c{90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105};
  std::vector<BlockHash> hc;
  const SeqTokens vc = view(3, c, hc, 4);
  hit = kv.get_computed_blocks(vc);
  EXPECT_TRUE(hit.block_ids.empty());
  ASSERT_TRUE(kv.allocate_slots(3, 0, 16, &hit).has_value());
  const V table_c(kv.block_table(3).begin(), kv.block_table(3).end());
  EXPECT_EQ(table_c, (V{3, 2, 5, 4}));
  ev = kv.drain_block_events();
  ASSERT_EQ(ev.size(), 2u);  // block 5 held no full block's hash (b's partial tail)
  expect_removed(ev[0], 2, ha[1]);
  expect_removed(ev[1], 4, hb[1]);
  kv.cache_blocks(vc, 16);
  ev = kv.drain_block_events();
  ASSERT_EQ(ev.size(), 4u);
  for (int32_t i = 0; i < 4; ++i) {
    expect_stored(ev[static_cast<size_t>(i)], table_c[static_cast<size_t>(i)], hc[static_cast<size_t>(i)],
                  i == 0 ? std::nullopt : std::optional<BlockHash>(hc[static_cast<size_t>(i) - 1]),
                  V(c.begin() + 4 * i, c.begin() + 4 * i + 4));
  }
  kv.check_integrity();
}

}  // namespace
}  // namespace tessera::kv
