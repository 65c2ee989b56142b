// Sliding-window attention (KvLayer::window: a query at p sees keys (p - window, p]): the flash
// kernel on every ISA path against the naive twin, which masks by the definition; bit invariance
// of a row under chunking and batching; and proof that keys wholly before every window are never
// read (their K/V replaced by NaN leave the output bit-identical).
#include <gtest/gtest.h>

#include <cmath>
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

constexpr double kFlashVsNaiveMaxAbs = 2e-5;

double max_abs(const std::vector<float>& ref, const std::vector<float>& got) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) m = std::max(m, std::fabs(double(ref[i]) - got[i]));
  return m;
}

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out{IsaLevel::kScalar};
  if (detected_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (detected_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

struct IsaGuard {
  ~IsaGuard() { set_isa_level(detected_isa_level()); }
};

struct Case {
  int32_t num_heads, num_kv_heads, head_dim, block_size, window;
};

// A batch of decode rows past the window, a prefill chunk that crosses the window's edge, a short
// fresh prompt (window larger than it) and a speculative chunk across a partition edge.
TEST(SlidingWindowAttention, FlashMatchesMaskedNaive) {
  IsaGuard guard;
  const Case cases[] = {{4, 1, 256, 16, 512}, {4, 1, 256, 16, 100}, {9, 3, 64, 16, 1},  {9, 3, 64, 32, 64},
                        {6, 2, 32, 1, 37},    {5, 5, 40, 16, 300},  {4, 2, 16, 16, 257}};
  const std::vector<Chunk> batch = {{0, 899, 1}, {1, 500, 200}, {2, 0, 37}, {3, 510, 5}};
  ThreadPool pool(2);
  for (const Case& k : cases) {
    for (KvDType dtype : {KvDType::kF32, KvDType::kF16}) {
      SCOPED_TRACE(::testing::Message() << "H=" << k.num_heads << " KVH=" << k.num_kv_heads << " hd=" << k.head_dim
                                        << " bs=" << k.block_size << " window=" << k.window);
      PagedFixture fx(k.num_heads, k.num_kv_heads, k.head_dim, k.block_size, dtype, {900, 700, 37, 515});
      fx.set_window(k.window);
      AttnWorkspace ws;
      const float scale = 1.0f / std::sqrt(float(k.head_dim));
      fx.step({{0, 0, 899}, {1, 0, 500}, {3, 0, 510}}, AttnPath::kFlashRef, pool, ws, scale);
      const std::vector<float> naive = fx.step(batch, AttnPath::kNaive, pool, ws, scale);
      const std::vector<float> ref = fx.step(batch, AttnPath::kFlashRef, pool, ws, scale);
      EXPECT_LT(max_abs(naive, ref), kFlashVsNaiveMaxAbs);
      for (IsaLevel level : levels()) {
        set_isa_level(level);
        const std::vector<float> flash = fx.step(batch, AttnPath::kFlash, pool, ws, scale);
        EXPECT_LT(max_abs(naive, flash), kFlashVsNaiveMaxAbs) << isa_name(level);
      }
    }
  }
}

// The naive twin really masks: with a window of 1 each row's output is its own V row.
TEST(SlidingWindowAttention, WindowOfOneReturnsOwnValue) {
  ThreadPool pool(1);
  PagedFixture fx(2, 1, 16, 16, KvDType::kF32, {80});
  fx.set_window(1);
  AttnWorkspace ws;
  const std::vector<float> out = fx.step({{0, 0, 80}}, AttnPath::kNaive, pool, ws, 0.25f);
  for (int32_t p = 0; p < 80; ++p) {
    std::vector<float> v(16);
    fx.fill(0, p, 2, v.data(), 16, 1.0f);
    for (int32_t h = 0; h < 2; ++h) {
      for (int32_t d = 0; d < 16; ++d) ASSERT_FLOAT_EQ(out[(size_t(p) * 2 + h) * 16 + d], v[d]) << p;
    }
  }
}

std::vector<float> rows_of_seq0(PagedFixture& fx, const std::vector<std::vector<Chunk>>& steps, AttnPath path,
                                int threads) {
  ThreadPool pool(threads);
  AttnWorkspace ws;
  std::vector<float> rows;
  for (const std::vector<Chunk>& step : steps) {
    const std::vector<float> out = fx.step(step, path, pool, ws, 0.125f);
    int32_t offset = 0;
    for (const Chunk& c : step) {
      if (c.seq == 0) {
        rows.insert(rows.end(), out.begin() + size_t(offset) * fx.row_q(), out.begin() + size_t(offset + c.count) * fx.row_q());
      }
      offset += c.count;
    }
  }
  return rows;
}

TEST(SlidingWindowAttention, RowBitsIndependentOfChunkingAndBatch) {
  IsaGuard guard;
  const int32_t len = 700;
  std::vector<std::vector<Chunk>> one{{{0, 0, len}}};
  std::vector<std::vector<Chunk>> chunks{{{0, 0, 130}}, {{0, 130, 333}}, {{0, 463, 237}}};
  std::vector<std::vector<Chunk>> decode{{{0, 0, 300}}};
  for (int32_t p = 300; p < len; ++p) decode.push_back({{0, p, 1}});
  std::vector<std::vector<Chunk>> batched{{{1, 0, 200}, {0, 0, 271}}, {{0, 271, 429}, {1, 200, 1}}};
  for (IsaLevel level : levels()) {
    set_isa_level(level);
    for (int32_t window : {64, 200, 512}) {
      SCOPED_TRACE(::testing::Message() << isa_name(level) << " window=" << window);
      auto run = [&](const std::vector<std::vector<Chunk>>& s, AttnPath path, int threads) {
        PagedFixture fx(8, 2, 64, 16, KvDType::kF16, {len, 400});
        fx.set_window(window);
        return rows_of_seq0(fx, s, path, threads);
      };
      const std::vector<float> base = run(one, AttnPath::kFlash, 1);
      for (const auto* s : {&chunks, &decode, &batched}) {
        const std::vector<float> got = run(*s, AttnPath::kFlash, 2);
        ASSERT_EQ(got.size(), base.size());
        EXPECT_EQ(0, std::memcmp(got.data(), base.data(), base.size() * sizeof(float)));
      }
    }
  }
}

// Keys in tiles wholly before every row's window are never read: NaN there changes no bit. (A
// kernel that read them and masked the scores afterwards would still turn NaN V rows into NaN.)
TEST(SlidingWindowAttention, KeysBeforeTheWindowAreNeverRead) {
  IsaGuard guard;
  const int32_t window = 128;
  for (IsaLevel level : levels()) {
    set_isa_level(level);
    for (bool decode : {false, true}) {
      SCOPED_TRACE(::testing::Message() << isa_name(level) << (decode ? " decode" : " prefill chunk"));
      ThreadPool pool(2);
      AttnWorkspace ws;
      PagedFixture fx(4, 1, 64, 16, KvDType::kF16, {1100});
      fx.set_window(window);
      fx.use_rope(RopeLayout::kNeox);
      fx.step({{0, 0, 1000}}, AttnPath::kFlash, pool, ws, 0.125f);
      const std::vector<Chunk> next = decode ? std::vector<Chunk>{{0, 1000, 1}} : std::vector<Chunk>{{0, 1000, 100}};
      const AttnPath path = decode ? AttnPath::kFlashDecode : AttnPath::kFlash;
      const std::vector<float> clean = fx.step(next, path, pool, ws, 0.125f);
      // The earliest row (position 1000) sees keys from 873 on: the tiles at 832 and later are read.
      for (int32_t p = 0; p < 832; ++p) fx.poison(0, p);
      const std::vector<float> poisoned = fx.step(next, path, pool, ws, 0.125f);
      for (float x : poisoned) ASSERT_TRUE(std::isfinite(x));
      EXPECT_EQ(0, std::memcmp(clean.data(), poisoned.data(), clean.size() * sizeof(float)));
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
