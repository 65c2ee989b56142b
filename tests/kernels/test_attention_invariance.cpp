// Batch invariance of the flash kernel, bit for bit: the same sequence attended (a) as one prefill
// chunk, (b) as 3 chunks, (c) token by token as decode, (d) inside a batch with 2 other sequences,
// (e) as 5-token speculative chunks, with 1 and 2 threads, on every ISA path; and decode with rope
// and the K/V writes folded into the attention (paged_attention_decode) against separate passes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "isa_skip.h"
#include "attention_fixture.h"
#include "kernels/attention.h"
#include "util/cpu_features.h"

namespace tessera::kernels {
namespace {

using testing::AttnPath;
using testing::Chunk;
using testing::PagedFixture;

struct Shape {
  int32_t num_heads, num_kv_heads, head_dim, block_size;
  KvDType dtype;
};

// Runs sequence 0 (length len) as the given list of steps; returns its rows in position order.
// Every step is {chunk of seq 0, extra chunks of other sequences...}.
std::vector<float> run_schedule(PagedFixture& fx, const std::vector<std::vector<Chunk>>& steps,
                                AttnPath path, int threads, float scale) {
  ThreadPool pool(threads);
  AttnWorkspace ws;
  std::vector<float> rows;
  const int32_t row = fx.row_q();
  for (const std::vector<Chunk>& step : steps) {
    const std::vector<float> out = fx.step(step, path, pool, ws, scale);
    int32_t offset = 0;
    for (const Chunk& c : step) {
      if (c.seq == 0) rows.insert(rows.end(), out.begin() + size_t(offset) * row,
                                  out.begin() + size_t(offset + c.count) * row);
      offset += c.count;
    }
  }
  return rows;
}

// Scalar and every SIMD level this CPU has.
std::vector<IsaLevel> isa_levels_to_test() {
  std::vector<IsaLevel> levels{IsaLevel::kScalar};
  if (detected_isa_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (detected_isa_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  return levels;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PagedAttentionInvariance, RowBitsIndependentOfChunkingBatchAndThreads) {
  const int32_t len = 600;  // crosses the partition edges at 256 and 512
  const Shape shapes[] = {{9, 3, 64, 16, KvDType::kF32},
                          {16, 2, 64, 32, KvDType::kF16},
                          {5, 5, 40, 1, KvDType::kF32},
                          {8, 1, 24, 16, KvDType::kF32}};
  const std::vector<IsaLevel> levels = isa_levels_to_test();

  std::vector<std::vector<Chunk>> one{{{0, 0, len}}};
  std::vector<std::vector<Chunk>> three{{{0, 0, 150}}, {{0, 150, 250}}, {{0, 400, 200}}};
  std::vector<std::vector<Chunk>> decode;
  decode.push_back({{0, 0, 1}});
  for (int32_t p = 1; p < len; ++p) decode.push_back({{0, p, 1}});
  // Batched: other sequences before and after, of different lengths, prefill and decode.
  std::vector<std::vector<Chunk>> batched{{{1, 0, 300}, {2, 0, 7}},
                                          {{1, 300, 1}, {0, 0, 333}, {2, 7, 90}},
                                          {{2, 97, 1}, {0, 333, 267}, {1, 301, 1}}};
  std::vector<std::vector<Chunk>> spec{{{0, 0, 290}}};
  for (int32_t p = 290; p < len; p += 5) spec.push_back({{0, p, 5}});

  for (const Shape& sh : shapes) {
    for (IsaLevel level : levels) {
      set_isa_level(level);
      SCOPED_TRACE(::testing::Message() << "H=" << sh.num_heads << " KVH=" << sh.num_kv_heads
                                        << " hd=" << sh.head_dim << " " << isa_name(level));
      const float scale = 0.17f;
      auto fresh = [&] {
        return PagedFixture(sh.num_heads, sh.num_kv_heads, sh.head_dim, sh.block_size, sh.dtype,
                            {len, 400, 200});
      };
      PagedFixture fx_a = fresh();
      const std::vector<float> a = run_schedule(fx_a, one, AttnPath::kFlash, 1, scale);
      ASSERT_EQ(a.size(), size_t(len) * fx_a.row_q());
      for (int threads : {1, 2}) {
        PagedFixture fx_a2 = fresh(), fx_b = fresh(), fx_c = fresh(), fx_d = fresh(), fx_e = fresh();
        EXPECT_TRUE(same_bits(a, run_schedule(fx_a2, one, AttnPath::kFlash, threads, scale))) << "(a) threads=" << threads;
        EXPECT_TRUE(same_bits(a, run_schedule(fx_b, three, AttnPath::kFlash, threads, scale))) << "(b) threads=" << threads;
        EXPECT_TRUE(same_bits(a, run_schedule(fx_c, decode, AttnPath::kFlash, threads, scale))) << "(c) threads=" << threads;
        EXPECT_TRUE(same_bits(a, run_schedule(fx_d, batched, AttnPath::kFlash, threads, scale))) << "(d) threads=" << threads;
        EXPECT_TRUE(same_bits(a, run_schedule(fx_e, spec, AttnPath::kFlash, threads, scale))) << "(e) threads=" << threads;
      }
    }
  }
  set_isa_level(detected_isa_level());
}

}  // namespace
}  // namespace tessera::kernels

namespace tessera::kernels {
namespace {

// The fused tiles of AVX2 and AVX-512 (block sizes that are multiples of 16: K and V read
// straight from the cache) against the three-step tiles of the same ISA (block size 8: load_tile
// copies the tile to f32 first): tiles are cut at absolute positions whatever the block size, so
// the same rows must come out bit for bit the same, for prefill chunks, decode and speculative
// chunks, with every KV dtype (and on AVX2 at a head size that is not a multiple of 16).
TEST(PagedAttentionInvariance, FusedTileBitsEqualThreeStepTiles) {
  if (detected_isa_level() < IsaLevel::kAvx2) TESSERA_SKIP_ISA_ABSENT("AVX2");
  const int32_t len = 300;
  std::vector<std::vector<Chunk>> steps{{{0, 0, 130}}, {{0, 130, 5}}, {{0, 135, 1}}, {{0, 136, 164}}};
  for (IsaLevel level : {IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (detected_isa_level() < level) continue;
    set_isa_level(level);
    for (int32_t head_dim : {64, 40}) {
      if (level == IsaLevel::kAvx512 && head_dim != 64) continue;  // 40: the AVX2 tiles' 8-wide tail
      for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kQ8}) {
        for (int32_t fused_block : {16, 32}) {
          SCOPED_TRACE(::testing::Message() << isa_name(level) << " head_dim=" << head_dim
                                            << " dtype=" << static_cast<int>(dtype) << " block=" << fused_block);
          PagedFixture three_step(9, 3, head_dim, 8, dtype, {len, 40});
          PagedFixture fused(9, 3, head_dim, fused_block, dtype, {len, 40});
          const std::vector<float> a = run_schedule(three_step, steps, AttnPath::kFlash, 2, 0.17f);
          const std::vector<float> b = run_schedule(fused, steps, AttnPath::kFlash, 2, 0.17f);
          ASSERT_EQ(a.size(), size_t(len) * three_step.row_q());
          EXPECT_TRUE(same_bits(a, b));
        }
      }
    }
  }
  set_isa_level(detected_isa_level());
}

}  // namespace
}  // namespace tessera::kernels

namespace tessera::kernels {
namespace {

// paged_attention_decode (q and k rotated and the K/V written inside the work units) against
// rope_with_table + write_kv + paged_attention: the same output rows and the same cache, bit for
// bit, on every ISA path, both rope layouts, every KV dtype, the fused and the three-step tiles,
// with decode steps that cross partition edges (256, 512) and block edges.
TEST(PagedAttentionInvariance, DecodeWithRopeAndWritesFoldedInMatchesSeparatePasses) {
  const Shape shapes[] = {{9, 3, 64, 16, KvDType::kF16},
                          {9, 3, 64, 32, KvDType::kQ8},
                          {9, 3, 64, 16, KvDType::kF32},
                          {8, 2, 32, 8, KvDType::kF16},
                          {6, 6, 16, 1, KvDType::kF32}};
  const std::vector<IsaLevel> levels = isa_levels_to_test();
  // Prefill (always the separate passes), then 24 one-token steps of all three sequences.
  const std::vector<Chunk> prefill{{0, 0, 500}, {1, 0, 250}, {2, 0, 1}};
  std::vector<std::vector<Chunk>> decode;
  for (int32_t i = 0; i < 24; ++i) decode.push_back({{0, 500 + i, 1}, {1, 250 + i, 1}, {2, 1 + i, 1}});
  for (const Shape& sh : shapes) {
    for (RopeLayout layout : {RopeLayout::kNormal, RopeLayout::kNeox}) {
      for (IsaLevel level : levels) {
        set_isa_level(level);
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << "H=" << sh.num_heads << " KVH=" << sh.num_kv_heads << " hd=" << sh.head_dim
                                            << " block=" << sh.block_size << " dtype=" << static_cast<int>(sh.dtype)
                                            << " neox=" << (layout == RopeLayout::kNeox) << " " << isa_name(level)
                                            << " threads=" << threads);
          ThreadPool pool(threads);
          std::vector<float> rows[2];
          std::vector<uint8_t> cache[2];
          for (int fused = 0; fused < 2; ++fused) {
            PagedFixture fx(sh.num_heads, sh.num_kv_heads, sh.head_dim, sh.block_size, sh.dtype, {524, 274, 25});
            fx.use_rope(layout);
            AttnWorkspace ws;
            fx.step(prefill, AttnPath::kFlash, pool, ws, 0.17f);
            for (const std::vector<Chunk>& step : decode) {
              const std::vector<float> out = fx.step(step, fused ? AttnPath::kFlashDecode : AttnPath::kFlash, pool, ws, 0.17f);
              rows[fused].insert(rows[fused].end(), out.begin(), out.end());
            }
            cache[fused] = fx.cache_bytes();
          }
          ASSERT_EQ(rows[0].size(), size_t(24) * 3 * sh.num_heads * sh.head_dim);
          EXPECT_TRUE(same_bits(rows[0], rows[1]));
          EXPECT_TRUE(cache[0] == cache[1]);
        }
      }
    }
  }
  set_isa_level(detected_isa_level());
}

// A step in which a sequence has several query rows is not a decode step.
TEST(PagedAttentionInvariance, DecodeEntryPointRejectsMultiTokenSequences) {
  PagedFixture fx(4, 2, 16, 16, KvDType::kF32, {40, 40});
  fx.use_rope(RopeLayout::kNormal);
  ThreadPool pool(1);
  AttnWorkspace ws;
  EXPECT_DEATH(fx.step({{0, 0, 3}, {1, 0, 1}}, AttnPath::kFlashDecode, pool, ws, 0.2f), "other than one query row");
}

// write_kv_head stops with a clear message on a slot outside the cache or a KV head outside the
// layer, before it writes anything.
TEST(PagedAttentionInvariance, WriteKvHeadRejectsBadSlotAndHead) {
  PagedFixture fx(4, 2, 16, 16, KvDType::kF16, {40});
  const std::vector<float> row(16, 0.5f);
  const int64_t num_slots = int64_t{fx.kv().num_blocks} * fx.kv().block_size;
  EXPECT_DEATH(write_kv_head(fx.kv(), num_slots, 0, row.data(), row.data()), "out of");
  EXPECT_DEATH(write_kv_head(fx.kv(), -1, 0, row.data(), row.data()), "out of");
  EXPECT_DEATH(write_kv_head(fx.kv(), 0, 2, row.data(), row.data()), "kv head 2 of 2");
  EXPECT_DEATH(write_kv_head(fx.kv(), 0, -1, row.data(), row.data()), "kv head -1 of 2");
}

}  // namespace
}  // namespace tessera::kernels
