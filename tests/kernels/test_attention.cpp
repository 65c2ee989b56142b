// Paged attention: write_kv placement, known outputs (one-hot, uniform), the flash kernel (each
// ISA path) against the naive twin on awkward shapes, and workspace growth and peak bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "attention_fixture.h"
#include "kernels/attention.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace tessera::kernels {
namespace {

using testing::AttnPath;
using testing::Chunk;
using testing::PagedFixture;

// Error budgets (flash vs naive differ only in summation order and exp's last bits).
constexpr double kFlashVsNaiveMaxNmse = 1e-10;
constexpr double kFlashVsNaiveMaxAbs = 2e-5;
constexpr double kKnownOutputMaxAbs = 1e-6;

double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (double(ref[i]) - got[i]) * (double(ref[i]) - got[i]);
    norm += double(ref[i]) * ref[i];
  }
  return norm == 0 ? err : err / norm;
}

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

TEST(WriteKv, OffsetsAreTheHeadMajorBlockLayout) {
  KvLayer kv;
  kv.num_kv_heads = 3, kv.head_dim = 64, kv.block_size = 16;
  EXPECT_EQ(k_offset(kv, 0, 0, 0), 0);
  EXPECT_EQ(k_offset(kv, 0, 5, 0), 5);             // keys of a block are adjacent
  EXPECT_EQ(k_offset(kv, 0, 0, 1), 64 * 16);       // then head_dim rows of block_size per head
  EXPECT_EQ(k_offset(kv, 2, 3, 1), (2 * 3 + 1) * 64 * 16 + 3);  // then blocks
  EXPECT_EQ(v_offset(kv, 0, 5, 0), 5 * 64);        // V rows of one head are adjacent
  EXPECT_EQ(v_offset(kv, 2, 3, 1), ((2 * 3 + 1) * 16 + 3) * 64);
}

TEST(WriteKv, PlacesRowsInTheirSlotsAndSkipsPadding) {
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16}) {
    const int32_t num_kv_heads = 2, head_dim = 4, block_size = 3, num_blocks = 4;
    const int32_t row = num_kv_heads * head_dim;
    const size_t elem = dtype == KvDType::kF32 ? 4 : 2;
    std::vector<uint8_t> k(size_t(num_blocks) * block_size * row * elem, 0);
    std::vector<uint8_t> v(k.size(), 0);
    KvLayer kv{k.data(), v.data(), dtype, num_blocks, block_size, num_kv_heads, head_dim};
    std::vector<float> ks(3 * row), vs(3 * row);
    for (int i = 0; i < 3 * row; ++i) {
      ks[i] = 0.1f * i + 0.01f;
      vs[i] = -0.2f * i;
    }
    const int64_t slots[3] = {7, -1, 2};
    AttnMetadata md;
    md.num_tokens = 3;
    md.slot_mapping = slots;
    write_kv(kv, md, ks.data(), vs.data());
    // Element i = head * head_dim + d of a slot's row: V is [block][head][slot in block][d]
    // (v_offset), K is [block][head][d][slot in block] (k_offset: d at stride block_size).
    auto get = [&](const std::vector<uint8_t>& store, int64_t slot, int i) {
      const int64_t block = slot / block_size;
      const auto in_block = static_cast<int32_t>(slot % block_size);
      int64_t e = v_offset(kv, block, in_block, i / head_dim) + i % head_dim;
      if (&store == &k) e = k_offset(kv, block, in_block, i / head_dim) + int64_t{i % head_dim} * block_size;
      if (dtype == KvDType::kF32) return reinterpret_cast<const float*>(store.data())[e];
      return fp16_to_fp32(reinterpret_cast<const uint16_t*>(store.data())[e]);
    };
    auto expect = [&](float x) { return dtype == KvDType::kF32 ? x : fp16_to_fp32(fp32_to_fp16(x)); };
    for (int i = 0; i < row; ++i) {
      EXPECT_EQ(get(k, 7, i), expect(ks[i]));
      EXPECT_EQ(get(v, 7, i), expect(vs[i]));
      EXPECT_EQ(get(k, 2, i), expect(ks[2 * row + i]));
      EXPECT_EQ(get(v, 2, i), expect(vs[2 * row + i]));
    }
    // The padding token (slot -1) wrote nothing: every other slot is still zero.
    for (int64_t slot : {0, 1, 3, 4, 5, 6, 8, 9, 10, 11}) {
      for (int i = 0; i < row; ++i) EXPECT_EQ(get(k, slot, i), 0.0f);
    }
  }
}

// kQ8: each (slot, head) row of K and of V is int8 with its own scale d = amax / 127, q =
// round-half-even(x / d); the row's largest magnitude maps to +-127 exactly, and the padding slot
// writes nothing (its scales stay as they were).
TEST(WriteKv, Q8RowsAndScales) {
  const int32_t num_kv_heads = 2, head_dim = 4, block_size = 3, num_blocks = 4;
  const int32_t row = num_kv_heads * head_dim;
  std::vector<int8_t> k(size_t(num_blocks) * block_size * row, 0), v(k.size(), 0);
  std::vector<float> k_scale(size_t(num_blocks) * block_size * num_kv_heads, -1.0f), v_scale(k_scale.size(), -1.0f);
  KvLayer kv{k.data(), v.data(), KvDType::kQ8, num_blocks, block_size, num_kv_heads, head_dim};
  kv.k_scale = k_scale.data();
  kv.v_scale = v_scale.data();
  // slot 7, head 0: K (1, -2, 0.5, 4) -> d = 4/127, q = (32, -64, 16, 127) (31.75 -> 32, 15.875 -> 16);
  // head 1: all zero -> q = 0, d = 0. V = -K.
  const std::vector<float> ks = {1.0f, -2.0f, 0.5f, 4.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> vs(ks.size());
  for (size_t i = 0; i < ks.size(); ++i) vs[i] = -ks[i];
  std::vector<float> ks2(2 * row), vs2(2 * row);
  std::copy(ks.begin(), ks.end(), ks2.begin());
  std::copy(vs.begin(), vs.end(), vs2.begin());
  const int64_t slots[2] = {7, -1};
  AttnMetadata md;
  md.num_tokens = 2;
  md.slot_mapping = slots;
  write_kv(kv, md, ks2.data(), vs2.data());
  const int64_t block = 7 / block_size;
  const int32_t in_block = 7 % block_size;
  const int8_t want[4] = {32, -64, 16, 127};
  for (int d = 0; d < head_dim; ++d) {
    EXPECT_EQ(k[k_offset(kv, block, in_block, 0) + int64_t{d} * block_size], want[d]) << d;
    EXPECT_EQ(v[v_offset(kv, block, in_block, 0) + d], -want[d]) << d;
    EXPECT_EQ(k[k_offset(kv, block, in_block, 1) + int64_t{d} * block_size], 0);
  }
  EXPECT_EQ(k_scale[scale_offset(kv, block, in_block, 0)], 4.0f / 127.0f);
  EXPECT_EQ(v_scale[scale_offset(kv, block, in_block, 0)], 4.0f / 127.0f);
  EXPECT_EQ(k_scale[scale_offset(kv, block, in_block, 1)], 0.0f);
  size_t untouched = 0;
  for (float s : k_scale) untouched += s == -1.0f;
  EXPECT_EQ(untouched, k_scale.size() - 2);  // only slot 7's two heads were written
}

// One sequence of ctx tokens, keys k_i = e_{i} (ctx <= head_dim), queries q = 1e4 * e_j: row at
// position p >= j sees only key j, so its output is V row j exactly; rows with p < j see no
// matching key (all scores 0) and average V over [0, p].
struct KnownCase {
  int32_t head_dim = 8, ctx = 6, block_size = 2, num_heads = 3, num_kv_heads = 1;
};

std::vector<float> run_known(const KnownCase& kc, bool one_hot, AttnPath path, int threads) {
  const int32_t hd = kc.head_dim, H = kc.num_heads, KVH = kc.num_kv_heads;
  const int32_t num_blocks = (kc.ctx + kc.block_size - 1) / kc.block_size;
  std::vector<float> k(size_t(num_blocks) * kc.block_size * KVH * hd, 0.0f), v(k.size(), 0.0f);
  KvLayer kv{k.data(), v.data(), KvDType::kF32, num_blocks, kc.block_size, KVH, hd};
  std::vector<int32_t> blocks(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) blocks[b] = num_blocks - 1 - b;
  std::vector<float> ks(size_t(kc.ctx) * KVH * hd, 0.0f), vs(ks.size()), q(size_t(kc.ctx) * H * hd, 0.0f);
  std::vector<int64_t> slots(kc.ctx);
  for (int32_t p = 0; p < kc.ctx; ++p) {
    for (int32_t g = 0; g < KVH; ++g) {
      ks[(size_t(p) * KVH + g) * hd + p] = 1.0f;
      for (int32_t d = 0; d < hd; ++d) vs[(size_t(p) * KVH + g) * hd + d] = float(p * 100 + d + g * 1000);
    }
    for (int32_t h = 0; h < H; ++h) {
      if (one_hot) q[(size_t(p) * H + h) * hd + (h % kc.ctx)] = 1e4f;
    }
    slots[p] = int64_t{blocks[p / kc.block_size]} * kc.block_size + p % kc.block_size;
  }
  const int32_t qsl[2] = {0, kc.ctx};
  const int32_t seq_lens[1] = {kc.ctx};
  const int32_t indptr[2] = {0, num_blocks};
  AttnMetadata md{1, kc.ctx, qsl, seq_lens, indptr, blocks.data(), slots.data()};
  write_kv(kv, md, ks.data(), vs.data());
  std::vector<float> out(q.size(), -1.0f);
  ThreadPool pool(threads);
  AttnWorkspace ws;
  if (path == AttnPath::kNaive) {
    paged_attention_naive(kv, md, q.data(), H, 1.0f, out.data(), ws);
  } else if (path == AttnPath::kFlashRef) {
    paged_attention_ref(kv, md, q.data(), H, 1.0f, out.data(), pool, ws);
  } else {
    paged_attention(kv, md, q.data(), H, 1.0f, out.data(), pool, ws);
  }
  return out;
}

void check_known(const KnownCase& kc, bool one_hot, const std::vector<float>& out) {
  const int32_t hd = kc.head_dim, H = kc.num_heads, group = kc.num_heads / kc.num_kv_heads;
  for (int32_t p = 0; p < kc.ctx; ++p) {
    for (int32_t h = 0; h < H; ++h) {
      const int32_t g = h / group;
      const int32_t j = h % kc.ctx;
      for (int32_t d = 0; d < hd; ++d) {
        double expected = 0;
        if (one_hot && j <= p) {
          expected = j * 100 + d + g * 1000;
        } else {
          for (int32_t i = 0; i <= p; ++i) expected += i * 100 + d + g * 1000;
          expected /= (p + 1);
        }
        ASSERT_NEAR(out[(size_t(p) * H + h) * hd + d], expected, kKnownOutputMaxAbs * (1 + std::fabs(expected)))
            << "p=" << p << " h=" << h << " d=" << d;
      }
    }
  }
}

TEST(PagedAttention, OneHotAndUniformKnownOutputs) {
  IsaGuard guard;
  for (const KnownCase kc : {KnownCase{}, KnownCase{16, 16, 1, 5, 5}, KnownCase{32, 20, 16, 6, 2}}) {
    for (bool one_hot : {true, false}) {
      check_known(kc, one_hot, run_known(kc, one_hot, AttnPath::kNaive, 1));
      check_known(kc, one_hot, run_known(kc, one_hot, AttnPath::kFlashRef, 2));
      for (IsaLevel level : levels()) {
        set_isa_level(level);
        check_known(kc, one_hot, run_known(kc, one_hot, AttnPath::kFlash, 2));
      }
    }
  }
}

struct Shape {
  int32_t num_heads, num_kv_heads, head_dim;
};

// A batch of every kind of row: decode at depth, a chunk on top of a cached prefix, a fresh
// prompt, a one-token sequence, a speculative 5-row chunk across a partition edge, an idle one.
TEST(PagedAttention, FlashMatchesNaiveOnAwkwardShapes) {
  IsaGuard guard;
  const Shape shapes[] = {{9, 3, 64}, {5, 5, 32}, {16, 2, 64}, {7, 1, 16}, {4, 4, 40}, {6, 2, 8}, {3, 1, 20}};
  const std::vector<Chunk> batch = {{0, 299, 1}, {1, 500, 200}, {2, 0, 37}, {3, 0, 1}, {4, 515, 5}, {5, 3, 0}};
  ThreadPool pool(2);
  for (const Shape& sh : shapes) {
    for (int32_t block_size : {1, 16, 32}) {
      for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kQ8}) {
        SCOPED_TRACE(::testing::Message() << "H=" << sh.num_heads << " KVH=" << sh.num_kv_heads
                                          << " hd=" << sh.head_dim << " bs=" << block_size
                                          << " kv dtype=" << static_cast<int>(dtype));
        PagedFixture fx(sh.num_heads, sh.num_kv_heads, sh.head_dim, block_size, dtype,
                        {300, 700, 37, 1, 520, 3});
        AttnWorkspace ws;
        const float scale = 1.0f / std::sqrt(float(sh.head_dim));
        // The earlier positions of each sequence must be in the cache: write them first.
        fx.step({{0, 0, 299}, {1, 0, 500}, {4, 0, 515}, {5, 0, 3}}, AttnPath::kFlashRef, pool, ws, scale);
        const std::vector<float> naive = fx.step(batch, AttnPath::kNaive, pool, ws, scale);
        const std::vector<float> ref = fx.step(batch, AttnPath::kFlashRef, pool, ws, scale);
        EXPECT_LT(nmse(naive, ref), kFlashVsNaiveMaxNmse);
        EXPECT_LT(max_abs(naive, ref), kFlashVsNaiveMaxAbs);
        for (IsaLevel level : levels()) {
          set_isa_level(level);
          const std::vector<float> flash = fx.step(batch, AttnPath::kFlash, pool, ws, scale);
          EXPECT_LT(nmse(naive, flash), kFlashVsNaiveMaxNmse) << isa_name(level);
          EXPECT_LT(max_abs(naive, flash), kFlashVsNaiveMaxAbs) << isa_name(level);
        }
      }
    }
  }
}

TEST(AttnWorkspace, ReservedNeverGrowsAndFlashScratchIsLinear) {
  const int32_t H = 8, KVH = 2, hd = 64;
  ThreadPool pool(2);
  AttnLimits lim;
  lim.max_tokens = 1024;
  lim.max_seqs = 4;
  lim.max_context = 1024;
  lim.num_heads = H;
  lim.num_kv_heads = KVH;
  lim.head_dim = hd;
  lim.num_threads = 2;
  lim.naive = true;
  AttnWorkspace ws(lim);
  const size_t capacity = ws.capacity_bytes();
  PagedFixture fx(H, KVH, hd, 16, KvDType::kF32, {1024, 1024});
  const float scale = 0.125f;
  size_t flash_peak[2], naive_peak[2];
  const int32_t lens[2] = {256, 1024};
  for (int i = 0; i < 2; ++i) {
    ws.reset_peaks();
    fx.step({{i, 0, lens[i]}}, AttnPath::kFlash, pool, ws, scale);
    fx.step({{i, 0, lens[i]}}, AttnPath::kNaive, pool, ws, scale);
    flash_peak[i] = ws.peak_bytes_flash();
    naive_peak[i] = ws.peak_bytes_naive();
  }
  fx.step({{0, 255, 1}, {1, 1023, 1}}, AttnPath::kFlash, pool, ws, scale);  // decode: partials
  EXPECT_EQ(ws.num_grows(), 0);
  EXPECT_EQ(ws.capacity_bytes(), capacity);
  EXPECT_EQ(naive_peak[0], sizeof(float) * 256 * 256);
  EXPECT_EQ(naive_peak[1], sizeof(float) * 1024 * 1024);
  // Prefill scratch grows by at most a few bytes per token (the row-to-sequence map), not T^2.
  EXPECT_LE(flash_peak[1] - flash_peak[0], size_t{8} * (1024 - 256));
  EXPECT_LT(flash_peak[1], naive_peak[1] / 8);
}

}  // namespace
}  // namespace tessera::kernels
