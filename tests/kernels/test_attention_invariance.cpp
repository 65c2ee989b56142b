// Batch invariance of the flash kernel, bit for bit: the same sequence attended (a) as one prefill
// chunk, (b) as 3 chunks, (c) token by token as decode, (d) inside a batch with 2 other sequences,
// (e) as 5-token speculative chunks, with 1 and 2 threads, on every ISA path.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

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

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PagedAttentionInvariance, RowBitsIndependentOfChunkingBatchAndThreads) {
  const int32_t len = 600;  // crosses the partition edges at 256 and 512
  const Shape shapes[] = {{9, 3, 64, 16, KvDType::kF32},
                          {16, 2, 64, 32, KvDType::kF16},
                          {5, 5, 40, 1, KvDType::kF32},
                          {8, 1, 24, 16, KvDType::kF32}};
  std::vector<IsaLevel> levels{IsaLevel::kScalar};
  if (detected_isa_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (detected_isa_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);

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

// The AVX-512 fused tile (block sizes that are multiples of 16: K and V read straight from the
// cache) against the three-step tiles (block size 8: load_tile copies the tile to f32 first):
// tiles are cut at absolute positions whatever the block size, so the same rows must come out
// bit for bit the same, for prefill chunks, decode and speculative chunks, with every KV dtype.
TEST(PagedAttentionInvariance, FusedTileBitsEqualThreeStepTiles) {
  if (detected_isa_level() < IsaLevel::kAvx512) GTEST_SKIP() << "no AVX-512";
  set_isa_level(IsaLevel::kAvx512);
  const int32_t len = 300;
  std::vector<std::vector<Chunk>> steps{{{0, 0, 130}}, {{0, 130, 5}}, {{0, 135, 1}}, {{0, 136, 164}}};
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kQ8}) {
    for (int32_t fused_block : {16, 32}) {
      SCOPED_TRACE(::testing::Message() << "dtype=" << static_cast<int>(dtype) << " block=" << fused_block);
      PagedFixture three_step(9, 3, 64, 8, dtype, {len, 40});
      PagedFixture fused(9, 3, 64, fused_block, dtype, {len, 40});
      const std::vector<float> a = run_schedule(three_step, steps, AttnPath::kFlash, 2, 0.17f);
      const std::vector<float> b = run_schedule(fused, steps, AttnPath::kFlash, 2, 0.17f);
      ASSERT_EQ(a.size(), size_t(len) * three_step.row_q());
      EXPECT_TRUE(same_bits(a, b));
    }
  }
  set_isa_level(detected_isa_level());
}

}  // namespace
}  // namespace tessera::kernels
