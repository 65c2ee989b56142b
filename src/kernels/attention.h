// Paged attention over a KV cache stored in fixed-size blocks: write_kv, a FlashAttention-style
// tiled kernel with online softmax (prefill, chunked prefill, decode and speculative chunks all in
// one batch), and its naive twin that materializes every score.
//
// Invariants:
// - Batch invariance (kernels/README.md): the bits of one query row's output depend only on that
//   row's q, its sequence's K/V rows [0, p], head_dim and the ISA path; never on the other rows of
//   the chunk, the other sequences of the batch, the chunking of the prompt or the thread count.
//   The flash kernel splits the key range of a row into fixed partitions of kPartitionKeys keys,
//   each into fixed tiles of kTileKeys keys (both aligned to absolute positions), and folds the
//   partitions' (max, sum, accumulator) in ascending order, whatever the scheduling.
// - No allocation per call once the workspace has seen the largest step (reserve() up front).
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "util/aligned_vector.h"
#include "util/kv_dtype.h"
#include "util/thread_pool.h"

namespace tessera::kernels {

// The cache's element type is util's KvDType (util/kv_dtype.h). kQ8: int8 values with one f32
// scale per (slot, head) row of K and of V (symmetric, like the activation quantization of
// matmul_canon.h): d = amax / 127, q = round-half-even(x * 127 / amax) (q = 0, d = 0 when
// amax = 0), read back as float(q) * d. Half the bytes of f16, which is what a batched decode step
// spends its attention time reading. The scales are kept apart (KvLayer::k_scale).
using ::tessera::KvDType;
using ::tessera::kv_element_bytes;

// One layer's paged K and V storage, head-major within each block: one KV head's keys of a block
// are one contiguous range in K and one in V (an attention work unit reads one KV head), and K is
// transposed within it, so the attention's K tile (head_dim rows of consecutive keys,
// attention_internal.h) is read as contiguous runs instead of being transposed from key rows at
// every step. A block is still one contiguous range of both.
struct KvLayer {
  void* k = nullptr;       // [num_blocks][num_kv_heads][head_dim][block_size] of dtype (k_offset)
  void* v = nullptr;       // [num_blocks][num_kv_heads][block_size][head_dim] of dtype (v_offset)
  KvDType dtype = KvDType::kF32;
  int32_t num_blocks = 0;
  int32_t block_size = 0;    // tokens per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  // kQ8 only: the scale of each K and each V row, [num_blocks][num_kv_heads][block_size] (scale_offset).
  float* k_scale = nullptr;
  float* v_scale = nullptr;
  // Sliding-window attention (Gemma 3's local layers, Mistral-style SWA): a query at position p
  // sees only the keys (p - window, p], i.e. the last `window` positions; 0 = every key [0, p].
  // The kernels never read a tile that lies wholly before a row's window.
  int32_t window = 0;
};

// First key position a query at position `pos` attends to in layer kv.
inline int32_t first_visible_key(const KvLayer& kv, int32_t pos) {
  return kv.window > 0 ? std::max(0, pos - kv.window + 1) : 0;
}

// Index into KvLayer::k_scale / v_scale of the row of the key in slot `in_block` of `block`, head kv_head.
inline int64_t scale_offset(const KvLayer& kv, int64_t block, int32_t in_block, int32_t kv_head) {
  return (block * kv.num_kv_heads + kv_head) * kv.block_size + in_block;
}

// kQ8 quantization of one row x[n] into q[n]; returns its scale d (see KvDType).
inline float quantize_kv_row(const float* x, int32_t n, int8_t* q) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0.0f)) {
    for (int32_t i = 0; i < n; ++i) q[i] = 0;
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (int32_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inv));
  return amax / 127.0f;
}

// Element offset in KvLayer::k of dimension 0 of the key in slot `in_block` of `block`, head
// kv_head; dimension d is d * block_size elements further.
inline int64_t k_offset(const KvLayer& kv, int64_t block, int32_t in_block, int32_t kv_head) {
  return (block * kv.num_kv_heads + kv_head) * int64_t{kv.head_dim} * kv.block_size + in_block;
}

// Element offset in KvLayer::v of the value row (head_dim contiguous elements) of the key in slot
// `in_block` of `block`, head kv_head.
inline int64_t v_offset(const KvLayer& kv, int64_t block, int32_t in_block, int32_t kv_head) {
  return ((block * kv.num_kv_heads + kv_head) * kv.block_size + in_block) * int64_t{kv.head_dim};
}

// CSR over the sequences of one batch, built once per step.
struct AttnMetadata {
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;                        // total query rows
  const int32_t* query_start_loc = nullptr;      // [num_seqs + 1]: rows of seq s are [qsl[s], qsl[s+1])
  const int32_t* seq_lens = nullptr;             // [num_seqs]: context length after this step (cached + new)
  const int32_t* block_table_indptr = nullptr;   // [num_seqs + 1] into block_table_indices
  const int32_t* block_table_indices = nullptr;  // block ids of each sequence, in order
  const int64_t* slot_mapping = nullptr;         // [num_tokens]: block * block_size + offset; < 0 = skip
};

// Fixed tiling constants of the flash kernel (part of the numerics: changing them changes bits).
inline constexpr int32_t kTileKeys = 64;         // keys per K/V tile
inline constexpr int32_t kPartitionKeys = 256;   // keys per flash-decoding partition (multiple of kTileKeys)
inline constexpr int32_t kRowsPerTile = 128;     // query rows x heads of one GQA group per work unit

// Sizes the workspace once (all maxima, per step).
struct AttnLimits {
  int32_t max_tokens = 0;    // query rows per step
  int32_t max_seqs = 0;      // sequences per step
  int32_t max_context = 0;   // longest seq_len
  int64_t max_total_context = 0;  // sum of seq_lens of the decoding sequences of a step (0: max_context)
  int32_t num_heads = 0;     // query heads
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t num_threads = 1;   // threads of the pool that will run paged_attention
  bool naive = false;        // also reserve the naive twin's score matrix (max_tokens x max_context)
};

// Preallocated scratch of both kernels. Buffers grow only when a call exceeds what was reserved
// (counted in num_grows()); a reserved workspace never allocates. Not shared between threads
// except through one paged_attention call: a work unit claims a free ThreadScratch slot for its
// duration (at most num_threads units run at once), so units may run on any thread.
class AttnWorkspace {
 public:
  AttnWorkspace() = default;
  explicit AttnWorkspace(const AttnLimits& limits) { reserve(limits); }

  void reserve(const AttnLimits& limits);
  // Largest number of scratch bytes any call has used so far (flash and naive tracked apart).
  size_t peak_bytes_flash() const { return peak_flash_; }
  size_t peak_bytes_naive() const { return peak_naive_; }
  size_t capacity_bytes() const;
  int64_t num_grows() const { return num_grows_; }
  void reset_peaks() { peak_flash_ = peak_naive_ = 0; }

  // --- internal (used by attention.cpp / attention_naive.cpp) ---
  struct ThreadScratch {
    AlignedVector<float> kt;            // [head_dim][kTileKeys]: one K tile, transposed
    AlignedVector<float> vt;            // [kTileKeys][head_dim]: one V tile converted to f32 (f16 KV)
    std::vector<const float*> v_rows;   // [kTileKeys]: V row of each key of the tile
    AlignedVector<float> scores;        // [rows][kTileKeys]
    AlignedVector<float> part;          // [rows][head_dim + 2]: partition state (acc, m, l)
    AlignedVector<float> total;         // [rows][head_dim + 2]: folded state over partitions
    std::vector<const float*> q_rows;   // [rows]
    AlignedVector<float> q_rope;        // [rows][head_dim]: rotated query rows (paged_attention_decode)
    AlignedVector<float> k_rope;        // [head_dim]: one rotated key head (paged_attention_decode)
  };
  void ensure_threads(int num_threads, int32_t head_dim, int32_t rows);
  // Claims a free slot of `threads` (one of num_threads; never blocks when at most num_threads
  // callers hold one) and releases it.
  int claim_slot();
  void release_slot(int slot) { slot_busy_[slot].store(0, std::memory_order_release); }
  void ensure_seqs(int32_t num_seqs, int32_t num_tokens);
  float* ensure_partials(size_t floats);
  float* ensure_naive(size_t floats);
  void note_flash(size_t bytes) { peak_flash_ = bytes > peak_flash_ ? bytes : peak_flash_; }
  void note_naive(size_t bytes) { peak_naive_ = bytes > peak_naive_ ? bytes : peak_naive_; }

  std::vector<ThreadScratch> threads;   // [num_threads]
  std::vector<int64_t> unit_offset;     // [num_seqs + 1]: first work unit of each sequence
  std::vector<int64_t> partial_offset;  // [num_seqs]: first partial (float index) of split sequences
  std::vector<int32_t> token_seq;       // [num_tokens]: sequence of each query row
  AlignedVector<float> partials;        // split sequences: [rows][heads][partitions][head_dim + 2]
  AlignedVector<float> naive_scores;    // [q_len][seq_len] of one head (naive twin)

 private:
  void grow(AlignedVector<float>& buf, size_t floats);
  std::unique_ptr<std::atomic<int32_t>[]> slot_busy_;  // [threads.size()]: 1 while claimed
  size_t peak_flash_ = 0;
  size_t peak_naive_ = 0;
  int64_t num_grows_ = 0;
};

// Writes each new token's K and V rows into its slot. k, v: [num_tokens][num_kv_heads * head_dim]
// f32 (rounded to nearest-even f16 for an f16 cache). Slots < 0 are skipped (padding).
// Tokens [t_begin, t_end) only (t_end < 0: all): disjoint ranges may run on different threads.
void write_kv(const KvLayer& kv, const AttnMetadata& md, const float* k, const float* v, int32_t t_begin = 0,
              int32_t t_end = -1);
// write_kv for one KV head of one token: kh, vh are that head's K and V rows (head_dim f32).
void write_kv_head(const KvLayer& kv, int64_t slot, int32_t kv_head, const float* kh, const float* vh);

// q, out: [num_tokens][num_heads][head_dim] f32. Query row j (0-based) of sequence s, which has
// q_len = qsl[s+1]-qsl[s] rows, sits at position p = seq_lens[s] - q_len + j and attends causally
// to positions [first_visible_key(kv, p), p] of that sequence's paged K/V (which already hold the new tokens: write_kv
// runs first). GQA: query head h reads KV head h / (num_heads / num_kv_heads); MQA when
// num_kv_heads = 1. Dispatches once on util isa_level().
void paged_attention(const KvLayer& kv, const AttnMetadata& md, const float* q, int32_t num_heads,
                     float scale, float* out, ThreadPool& pool, AttnWorkspace& ws);

// A decode step's new rows for paged_attention_decode, before the rotary embedding.
struct DecodeTokens {
  const float* k = nullptr;        // [num_tokens][num_kv_heads * head_dim], not yet rotated
  const float* v = nullptr;        // [num_tokens][num_kv_heads * head_dim]
  const float* rope_cs = nullptr;  // [num_tokens][head_dim]: rope_table() of the tokens' positions
  RopeLayout rope_layout = RopeLayout::kNormal;
};
// Whether every sequence of md has exactly one query row (a pure decode step).
bool is_single_token_step(const AttnMetadata& md);
// paged_attention for a pure decode step with rope and write_kv folded in; q and fresh.k are not
// yet rotated, and q is left as it is. Each work unit rotates its query rows in its own scratch,
// and the unit that reads a token's new key (the one of the token's last partition) rotates that
// KV head's key and writes K and V into the slot just before it reads them: the lines are written
// and read on one core, without two more passes over the pool. Bits: the same as rope_with_table
// on q and k, then write_kv, then paged_attention.
void paged_attention_decode(const KvLayer& kv, const AttnMetadata& md, const float* q, const DecodeTokens& fresh,
                            int32_t num_heads, float scale, float* out, ThreadPool& pool, AttnWorkspace& ws);
// Same, scalar tile kernels (the flash algorithm's readable path; what TESSERA_FORCE_SCALAR runs).
void paged_attention_ref(const KvLayer& kv, const AttnMetadata& md, const float* q,
                         int32_t num_heads, float scale, float* out, ThreadPool& pool,
                         AttnWorkspace& ws);
// The naive twin: per sequence and head, the full [q_len][seq_len] score matrix, softmax, times V.
// Single-threaded, O(q_len * seq_len) scratch.
void paged_attention_naive(const KvLayer& kv, const AttnMetadata& md, const float* q,
                           int32_t num_heads, float scale, float* out, AttnWorkspace& ws);

}  // namespace tessera::kernels
