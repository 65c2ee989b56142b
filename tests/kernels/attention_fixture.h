// Test fixture for the paged attention kernels: a paged KV cache over a few sequences whose
// q/k/v rows are a pure function of (seed, sequence, position), so any schedule of chunks (one
// prefill, several chunks, token by token, batched with others) sees the same data.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace tessera::kernels::testing {

// kFlashDecode: paged_attention_decode (one-token sequences only), which rotates q and k and writes
// the K/V itself; every other path gets them rotated and written first.
enum class AttnPath { kFlash, kFlashRef, kNaive, kFlashDecode };

// One sequence's rows attended in a step: positions [begin, begin + count).
struct Chunk {
  int32_t seq;
  int32_t begin;
  int32_t count;
};

class PagedFixture {
 public:
  // max_lens: the longest context of each sequence. Blocks are handed out in a scrambled order so
  // no sequence is contiguous in the cache.
  PagedFixture(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, int32_t block_size,
               KvDType dtype, std::vector<int32_t> max_lens, uint32_t seed = 1)
      : num_heads_(num_heads), seed_(seed), max_lens_(std::move(max_lens)) {
    kv_.dtype = dtype;
    kv_.block_size = block_size;
    kv_.num_kv_heads = num_kv_heads;
    kv_.head_dim = head_dim;
    int32_t num_blocks = 0;
    for (int32_t len : max_lens_) num_blocks += (len + block_size - 1) / block_size;
    num_blocks += 3;  // some never used
    if (num_blocks % 7 == 0) ++num_blocks;  // the scramble below needs gcd(7, num_blocks) = 1
    kv_.num_blocks = num_blocks;
    const size_t elems = size_t(num_blocks) * block_size * num_kv_heads * head_dim;
    const size_t bytes = elems * static_cast<size_t>(kv_element_bytes(dtype));
    k_store_.assign(bytes, 0xff);  // NaN-ish garbage where nothing was written
    v_store_.assign(bytes, 0xff);
    kv_.k = k_store_.data();
    kv_.v = v_store_.data();
    if (dtype == KvDType::kQ8) {  // row scales, garbage until written
      const size_t rows = size_t(num_blocks) * block_size * num_kv_heads;
      k_scale_store_.assign(rows, std::numeric_limits<float>::quiet_NaN());
      v_scale_store_.assign(rows, std::numeric_limits<float>::quiet_NaN());
      kv_.k_scale = k_scale_store_.data();
      kv_.v_scale = v_scale_store_.data();
    }
    std::vector<int32_t> ids(num_blocks);
    for (int32_t i = 0; i < num_blocks; ++i) ids[i] = (i * 7 + 3) % num_blocks;
    int32_t next = 0;
    for (int32_t len : max_lens_) {
      std::vector<int32_t> table;
      for (int32_t b = 0; b < (len + block_size - 1) / block_size; ++b) table.push_back(ids[next++]);
      tables_.push_back(table);
    }
  }

  const KvLayer& kv() const { return kv_; }
  // Makes this a sliding-window layer: a query at p sees keys (p - window, p] (0: all).
  void set_window(int32_t window) { kv_.window = window; }
  // Overwrites the stored K and V of key `pos` of sequence `seq` (every head) with NaN bytes: a
  // kernel that reads them gets NaN in its output.
  void poison(int32_t seq, int32_t pos) {
    const int32_t block = tables_[seq][pos / kv_.block_size];
    const int32_t in_block = pos % kv_.block_size;
    const size_t elem = static_cast<size_t>(kv_element_bytes(kv_.dtype));
    for (int32_t h = 0; h < kv_.num_kv_heads; ++h) {
      for (int32_t d = 0; d < kv_.head_dim; ++d) {
        std::memset(k_store_.data() + (k_offset(kv_, block, in_block, h) + int64_t{d} * kv_.block_size) * elem, 0xff, elem);
      }
      std::memset(v_store_.data() + v_offset(kv_, block, in_block, h) * elem, 0xff, elem * kv_.head_dim);
    }
  }
  // Rotates q and k by their positions from now on (rope_table of RopeParams{layout}).
  void use_rope(RopeLayout layout) { rope_ = RopeParams{layout, 10000.0f, 1.0f}, has_rope_ = true; }
  // The whole cache, for bit comparisons.
  std::vector<uint8_t> cache_bytes() const {
    std::vector<uint8_t> all(k_store_);
    all.insert(all.end(), v_store_.begin(), v_store_.end());
    for (const std::vector<float>* sc : {&k_scale_store_, &v_scale_store_}) {
      const auto* b = reinterpret_cast<const uint8_t*>(sc->data());
      all.insert(all.end(), b, b + sc->size() * sizeof(float));
    }
    return all;
  }
  int32_t row_q() const { return num_heads_ * kv_.head_dim; }
  int32_t row_kv() const { return kv_.num_kv_heads * kv_.head_dim; }

  // Deterministic rows: q scaled up so softmaxes are not flat.
  void fill(int32_t seq, int32_t pos, int kind, float* dst, int32_t n, float amp) const {
    std::mt19937 rng(seed_ * 1000003u + uint32_t(seq) * 7919u + uint32_t(pos) * 31u + uint32_t(kind));
    std::uniform_real_distribution<float> u(-amp, amp);
    for (int32_t i = 0; i < n; ++i) dst[i] = u(rng);
  }

  // Runs one step over `chunks` (each chunk's context = begin + count) and returns the output
  // rows, [sum of counts][num_heads][head_dim].
  std::vector<float> step(const std::vector<Chunk>& chunks, AttnPath path, ThreadPool& pool,
                          AttnWorkspace& ws, float scale) {
    std::vector<int32_t> qsl{0}, seq_lens, indptr{0}, indices;
    std::vector<int64_t> slots;
    std::vector<int32_t> positions;
    std::vector<float> q, k, v;
    for (const Chunk& c : chunks) {
      qsl.push_back(qsl.back() + c.count);
      seq_lens.push_back(c.begin + c.count);
      for (int32_t b : tables_[c.seq]) indices.push_back(b);
      indptr.push_back(static_cast<int32_t>(indices.size()));
      for (int32_t p = c.begin; p < c.begin + c.count; ++p) {
        const size_t oq = q.size(), ok = k.size();
        q.resize(oq + row_q());
        k.resize(ok + row_kv());
        v.resize(ok + row_kv());
        fill(c.seq, p, 0, q.data() + oq, row_q(), 3.0f);
        fill(c.seq, p, 1, k.data() + ok, row_kv(), 1.0f);
        fill(c.seq, p, 2, v.data() + ok, row_kv(), 1.0f);
        slots.push_back(int64_t{tables_[c.seq][p / kv_.block_size]} * kv_.block_size + p % kv_.block_size);
        positions.push_back(p);
      }
    }
    AttnMetadata md;
    md.num_seqs = static_cast<int32_t>(chunks.size());
    md.num_tokens = qsl.back();
    md.query_start_loc = qsl.data();
    md.seq_lens = seq_lens.data();
    md.block_table_indptr = indptr.data();
    md.block_table_indices = indices.data();
    md.slot_mapping = slots.data();
    const int32_t hd = kv_.head_dim;
    std::vector<float> rope_cs(size_t(md.num_tokens) * hd);
    if (has_rope_) rope_table(positions.data(), md.num_tokens, hd, rope_, rope_cs.data());
    std::vector<float> out(size_t(md.num_tokens) * row_q(), -7.0f);
    if (path == AttnPath::kFlashDecode) {
      TESSERA_CHECK(has_rope_, "kFlashDecode needs use_rope()");
      const DecodeTokens fresh{k.data(), v.data(), rope_cs.data(), rope_.layout};
      paged_attention_decode(kv_, md, q.data(), fresh, num_heads_, scale, out.data(), pool, ws);
      return out;
    }
    if (has_rope_) {
      rope_with_table(q.data(), md.num_tokens, num_heads_, hd, rope_.layout, rope_cs.data());
      rope_with_table(k.data(), md.num_tokens, kv_.num_kv_heads, hd, rope_.layout, rope_cs.data());
    }
    write_kv(kv_, md, k.data(), v.data());
    switch (path) {
      case AttnPath::kFlash:
        paged_attention(kv_, md, q.data(), num_heads_, scale, out.data(), pool, ws);
        break;
      case AttnPath::kFlashRef:
        paged_attention_ref(kv_, md, q.data(), num_heads_, scale, out.data(), pool, ws);
        break;
      case AttnPath::kNaive:
        paged_attention_naive(kv_, md, q.data(), num_heads_, scale, out.data(), ws);
        break;
      case AttnPath::kFlashDecode:
        break;
    }
    return out;
  }

 private:
  int32_t num_heads_;
  uint32_t seed_;
  std::vector<int32_t> max_lens_;
  KvLayer kv_;
  std::vector<uint8_t> k_store_, v_store_;
  std::vector<float> k_scale_store_, v_scale_store_;  // kQ8 only
  std::vector<std::vector<int32_t>> tables_;
  RopeParams rope_;
  bool has_rope_ = false;
};

}  // namespace tessera::kernels::testing
