// plan_kv_cache_layout (groups, slots) on the layer patterns of real models, and the admission
// bound max_kv_blocks_held against a KvCacheManager driven through every chunking of a request.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/kv_cache_layout.h"
#include "kv/kv_cache_manager.h"

namespace tessera::kv {
namespace {

using V = std::vector<int32_t>;

// Gemma 3's pattern: every 6th layer (5, 11, ...) global, the others local with window w.
V gemma3_windows(int32_t num_layers, int32_t w) {
  V v(static_cast<size_t>(num_layers), w);
  for (int32_t l = 5; l < num_layers; l += 6) v[static_cast<size_t>(l)] = 0;
  return v;
}

TEST(KvCacheLayout, Gemma3_270mIsSixGroupsOfThreeLayers) {
  const KvCacheLayout k = plan_kv_cache_layout(gemma3_windows(18, 512));
  EXPECT_EQ(k.num_slots, 3);
  EXPECT_EQ(k.group_windows, (V{0, 512, 512, 512, 512, 512}));
  EXPECT_EQ(k.layer_group, (V{1, 1, 1, 2, 2, 0, 2, 3, 3, 3, 4, 0, 4, 4, 5, 5, 5, 0}));
  EXPECT_EQ(k.layer_slot, (V{0, 1, 2, 0, 1, 0, 2, 0, 1, 2, 0, 1, 1, 2, 0, 1, 2, 2}));
}

TEST(KvCacheLayout, Gemma3_1bLeavesTheLastLocalGroupShort) {
  // 26 layers: 4 global (5, 11, 17, 23), 22 local: groups of 4, the sixth local group holds 2.
  const KvCacheLayout k = plan_kv_cache_layout(gemma3_windows(26, 512));
  EXPECT_EQ(k.num_slots, 4);
  EXPECT_EQ(k.group_windows, (V{0, 512, 512, 512, 512, 512, 512}));
  EXPECT_EQ(k.layer_group[24], 6);
  EXPECT_EQ(k.layer_group[25], 6);
  EXPECT_EQ(k.layer_slot[24], 0);
  EXPECT_EQ(k.layer_slot[25], 1);
  V per_group(7, 0);
  for (int32_t g : k.layer_group) ++per_group[static_cast<size_t>(g)];
  EXPECT_EQ(per_group, (V{4, 4, 4, 4, 4, 4, 2}));
}

TEST(KvCacheLayout, UniformModelsAreOneGroupSlotPerLayer) {
  const KvCacheLayout full = plan_kv_cache_layout(V(30, 0));
  EXPECT_EQ(full.group_windows, V{0});
  EXPECT_EQ(full.num_slots, 30);
  V iota(30);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(full.layer_slot, iota);
  EXPECT_EQ(full.layer_group, V(30, 0));
  // Mistral v0.1 style: one window on every layer still frees blocks (one sliding group).
  const KvCacheLayout swa = plan_kv_cache_layout(V(4, 4096), /*hybrid=*/false);
  EXPECT_EQ(swa.group_windows, V{4096});
  EXPECT_EQ(swa.num_slots, 4);
}

TEST(KvCacheLayout, HybridOffKeepsEveryBlockInOneFullGroup) {
  const KvCacheLayout k = plan_kv_cache_layout(gemma3_windows(18, 512), /*hybrid=*/false);
  EXPECT_EQ(k.group_windows, V{0});
  EXPECT_EQ(k.num_slots, 18);
  EXPECT_EQ(k.layer_group, V(18, 0));
  EXPECT_EQ(k.layer_slot[17], 17);
}

TEST(KvCacheLayout, OneGlobalLayerMakesGroupsOfOne) {
  const KvCacheLayout k = plan_kv_cache_layout(V{8, 8, 0, 8});
  EXPECT_EQ(k.num_slots, 1);
  EXPECT_EQ(k.group_windows, (V{0, 8, 8, 8}));
  EXPECT_EQ(k.layer_group, (V{1, 2, 0, 3}));
  EXPECT_EQ(k.layer_slot, (V{0, 0, 0, 0}));
  EXPECT_TRUE(plan_kv_cache_layout(V{}).group_windows.empty());
}

TEST(KvCacheLayout, MaxBlocksHeldFormula) {
  // Full groups: ceil(positions / bs). Window 32, steps of up to 16, bs 16: ceil(47 / 16) + 1 = 4.
  EXPECT_EQ(max_kv_blocks_held(V{0}, 16, 161, 512), 11);
  EXPECT_EQ(max_kv_blocks_held(V{0, 32}, 16, 1000, 16), 63 + 4);
  EXPECT_EQ(max_kv_blocks_held(V{32}, 16, 20, 16), 2);  // never more than the full count
  EXPECT_EQ(max_kv_blocks_held(V{512, 512}, 16, 8192, 512), 2 * 65);  // ceil(1023 / 16) + 1
}

// The bound holds for every step of a request driven through the manager with every chunk size,
// block size, window and alignment (a first chunk of `offset` tokens shifts every later step), and
// some alignment comes within one block of it: admission never admits what could not fit, and
// refuses at most one block's worth too early.
TEST(KvCacheLayout, MaxBlocksHeldBoundsEveryChunking) {
  for (int32_t bs : {1, 4, 16}) {
    for (int32_t w : {1, 5, 16, 33}) {
      for (int32_t chunk : {1, 3, 16, 40}) {
        const V windows = {0, w};
        const int32_t positions = 150;
        const int64_t bound = max_kv_blocks_held(windows, bs, positions, chunk);
        int64_t most_of_all = 0;
        for (int32_t offset = 0; offset < std::max(bs, chunk); ++offset) {
          KvCacheManager kv({.num_blocks = 4096, .block_size = bs, .enable_prefix_caching = false,
                             .groups = {{.sliding_window = 0}, {.sliding_window = w}}});
          int64_t most = 0;
          for (int32_t c = 0; c < positions;) {
            const int32_t n = std::min(c == 0 && offset > 0 ? offset : chunk, positions - c);
            ASSERT_TRUE(kv.allocate_slots(7, c, n).has_value());
            most = std::max<int64_t>(most, kv.num_blocks_held(7));
            c += n;
          }
          EXPECT_LE(most, bound) << "bs " << bs << " w " << w << " chunk " << chunk << " offset " << offset;
          most_of_all = std::max(most_of_all, most);
        }
        EXPECT_GE(most_of_all, bound - 1) << "bs " << bs << " w " << w << " chunk " << chunk;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kv
