// The flash attention driver: work units, scheduling and the fold across partitions, over the
// per-ISA tile kernels of attention_internal.h (the workspace: attention_workspace.cpp). A pure
// decode step may hand it the new rows unrotated (paged_attention_decode): each split unit then
// rotates its own query rows, and the unit of a token's last partition writes the token's K/V.
//
// A query row at position p attends to keys [0, p] (in a sliding-window layer only the last
// kv.window of them: partitions and tiles wholly before the window are never read, and a tile that
// the window's start cuts takes only its keys from that start on), cut into partitions of
// kPartitionKeys keys:
//
//   keys:  |<- partition 0 ->|<- partition 1 ->| ... |<- partition k (p inside) ->|
//          |tile|tile|tile|tile|tile|tile|        ...  |tile|tile .. p]            |
//
// Each partition yields a partial state (acc, m, l) by online softmax over its tiles; partials are
// folded in ascending order. Two schedules compute exactly these steps for every row:
// - split (decode, short chunks: q_len fits one query tile): one unit per (sequence, KV head,
//   partition) writes its partials to the workspace, then a second pass folds them per row
//   (flash-decoding: a long context uses every core); a sequence of one partition (a decode
//   context up to kPartitionKeys) has nothing to fold, and its unit finishes its rows itself;
// - tiled (prefill): one unit per (sequence, KV head, query tile) walks the partitions itself and
//   folds each one as soon as it is done (O(1) scratch per thread).
// The rows of a unit are the query tile's tokens x the query heads of one KV head group, so each
// K/V tile is loaded once for the whole GQA group.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_internal.h"
#include "util/check.h"
#include "util/cpu_features.h"

namespace tessera::kernels {
namespace {

using attn_detail::state_stride;
using attn_detail::TileKernels;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Below this many multiply-adds (rows x keys x heads x head_dim) a call stays on one thread. A
// pool dispatch costs ~0.5 us: one SmolLM2 sequence's decode (9 heads x 64) per layer, inline
// against pooled on 2 threads (probe_batched_attention --seqs 1 --ctx N, AMD EPYC): 16 keys 1.5
// against 1.9 us, 32 keys 2.3 both ways, 64 keys 4.1 against 3.2, 192 keys 11.6 against 8.1.
// (It was 1 << 20, which kept a single decode stream on one thread up to ~1800 keys.)
constexpr int64_t kInlineWork = int64_t{1} << 15;

// One call's constants.
struct Call {
  const KvLayer& kv;
  const AttnMetadata& md;
  const float* q;            // [num_tokens][num_heads][head_dim]
  float* out;                // same shape
  int32_t num_heads;
  int32_t group;             // query heads per KV head
  int32_t head_dim;
  int32_t tile_tokens;       // query tokens per tile (tiled schedule)
  float scale;
  const TileKernels& tk;
  const DecodeTokens* fresh;  // paged_attention_decode's unrotated rows (null: q, K and V are ready)
};

// One sequence of the batch, as the units see it.
struct SeqView {
  int32_t q_begin;     // first query row in the batch
  int32_t q_len;       // query rows
  int32_t first_pos;   // position of its first query row
  const int32_t* blocks;
  bool split;
  int32_t first_part;  // first partition its first row sees (0 unless a window hides the ones before)
  int32_t num_parts;   // partitions of its last row
  int32_t num_tiles;   // query tiles (tiled schedule)
};

// Keys [pos, pos + count) of one KV head of a sequence: what a work unit reads next, so that its
// last tile can stream them in (count 0: nothing).
struct KeyRange {
  const int32_t* blocks = nullptr;
  int32_t kv_head = 0, pos = 0, count = 0;
};

SeqView seq_view(const Call& c, int32_t s) {
  SeqView v;
  const AttnMetadata& md = c.md;
  v.q_begin = md.query_start_loc[s];
  v.q_len = md.query_start_loc[s + 1] - v.q_begin;
  v.first_pos = md.seq_lens[s] - v.q_len;
  v.blocks = md.block_table_indices + md.block_table_indptr[s];
  v.split = v.q_len <= c.tile_tokens;
  v.first_part = first_visible_key(c.kv, v.first_pos) / kPartitionKeys;
  v.num_parts = (md.seq_lens[s] + kPartitionKeys - 1) / kPartitionKeys;
  v.num_tiles = (v.q_len + c.tile_tokens - 1) / c.tile_tokens;
  return v;
}

// The fold and the final division: one copy of each, used by both schedules (same bits).
[[gnu::noinline]] void fold_state(float* total, const float* part, int32_t head_dim) {
  const float m_total = total[head_dim];
  const float m_part = part[head_dim];
  const float m = std::max(m_total, m_part);
  const float a = std::exp(m_total - m);
  const float b = std::exp(m_part - m);
  for (int32_t d = 0; d < head_dim; ++d) total[d] = total[d] * a + part[d] * b;
  total[head_dim + 1] = total[head_dim + 1] * a + part[head_dim + 1] * b;
  total[head_dim] = m;
}

[[gnu::noinline]] void finish_row(const float* state, int32_t head_dim, float* out) {
  const float inv = 1.0f / state[head_dim + 1];
  for (int32_t d = 0; d < head_dim; ++d) out[d] = state[d] * inv;
}

// Rows [begin, end) of a work unit.
struct RowRange {
  int32_t begin, end;
};

// The online-softmax update of one row with keys [skip, n) of a tile whose scores are s: the keys
// before `skip` lie before the row's window. Exactly the update of a tile that starts at key skip.
void update_from(const TileKernels& tk, const float* s, int32_t skip, int32_t n, const float* const* v_rows,
                 int32_t head_dim, float* state) {
  if (skip == 0) return tk.update(s, n, v_rows, head_dim, state);
  alignas(64) float shifted[kTileKeys + 16] = {};  // the update reads whole chunks of 8 or 16
  std::copy(s + skip, s + n, shifted);
  tk.update(shifted, n - skip, v_rows + skip, head_dim, state);
}

// Online softmax of partition `part_index` for the unit's rows: rows[r] = query token
// (first_token + r / group) x head (kv_head * group + r % group), in ascending position, so the
// rows that reach a key form a suffix and, with a window, the rows whose window still reaches a key
// form a prefix. Rows that see some key of the partition get a fresh partition state in sc.part;
// returns them.
RowRange run_partition(const Call& c, const SeqView& sv, int32_t kv_head, int32_t first_token,
                       int32_t num_rows, int32_t part_index, const KeyRange& after,
                       AttnWorkspace::ThreadScratch& sc) {
  const int32_t hd = c.head_dim;
  const int32_t stride = state_stride(hd);
  const int32_t key_lo = part_index * kPartitionKeys;
  const int32_t last_pos = sv.first_pos + first_token + (num_rows - 1) / c.group;
  const int32_t key_hi = std::min(key_lo + kPartitionKeys, last_pos + 1);
  auto row_pos = [&](int32_t r) { return sv.first_pos + first_token + r / c.group; };
  auto first_row_reaching = [&](int32_t key) {  // first row at a position >= key
    const int32_t token = std::max(0, key - sv.first_pos - first_token);
    return std::min(num_rows, token * c.group);
  };
  // First row whose window starts at or after `key` (none: num_rows).
  auto first_row_past = [&](int32_t key) {
    return c.kv.window > 0 ? first_row_reaching(key + c.kv.window - 1) : num_rows;
  };
  const RowRange rows{first_row_reaching(key_lo), first_row_past(key_lo + kPartitionKeys)};
  for (int32_t r = rows.begin; r < rows.end; ++r) {
    float* st = sc.part.data() + int64_t{r} * stride;
    std::fill(st, st + hd, 0.0f);
    st[hd] = kNegInf;
    st[hd + 1] = 0.0f;
  }
  if (rows.begin >= rows.end) return rows;
  // Tiles before the window of the partition's first row are skipped (tiles stay aligned to
  // absolute positions, so a row's tiles do not depend on the unit it runs in).
  const int32_t first_key = std::max(key_lo, first_visible_key(c.kv, row_pos(rows.begin)));
  const int32_t first_tile = key_lo + (first_key - key_lo) / kTileKeys * kTileKeys;
  // The first tile is requested up front (usually in flight already: the thread's previous unit
  // streamed it in); every tile then streams in the next one's K and V between its own loads,
  // the last tile the keys `after` (what this thread reads next). Decode is bound by memory
  // latency on the scattered blocks.
  attn_detail::prefetch_keys(c.kv, sv.blocks, kv_head, first_tile, std::min(kTileKeys, key_hi - first_tile));
  for (int32_t tile = first_tile; tile < key_hi; tile += kTileKeys) {
    const int32_t n = std::min(kTileKeys, key_hi - tile);
    attn_detail::PrefetchStream next =
        tile + n < key_hi ? attn_detail::PrefetchStream(c.kv, sv.blocks, kv_head, tile + n, std::min(kTileKeys, key_hi - tile - n))
                          : attn_detail::PrefetchStream(c.kv, after.blocks, after.kv_head, after.pos, after.count);
    const int32_t r0 = first_row_reaching(tile);        // rows before r0 are before the tile
    const int32_t r1 = first_row_past(tile + n);        // rows from r1 on see none of it
    int32_t r_cut = std::min(r1, first_row_past(tile + 1));  // rows from r_cut on: window starts inside
    if (r0 >= r1) continue;
    if (c.tk.tile != nullptr && c.kv.block_size % 16 == 0) {
      if (r0 < r_cut) {
        c.tk.tile(c.kv, sv.blocks, kv_head, tile, n, &next, sc.q_rows.data() + r0, r_cut - r0, row_pos(r0),
                  c.group, c.scale, sc.scores.data(), sc.part.data() + int64_t{r0} * stride, stride);
      }
      if (r_cut >= r1) continue;
    } else {
      r_cut = r0;  // the three steps below for every row
    }
    c.tk.load_tile(c.kv, sv.blocks, kv_head, tile, n, &next, sc.kt.data(), sc.vt.data(), sc.v_rows.data());
    c.tk.scores(sc.q_rows.data() + r_cut, r1 - r_cut, sc.kt.data(), hd, c.scale, sc.scores.data());
    for (int32_t r = r_cut; r < r1; ++r) {
      const int32_t n_row = std::min(n, row_pos(r) + 1 - tile);
      const int32_t skip = std::max(0, first_visible_key(c.kv, row_pos(r)) - tile);
      update_from(c.tk, sc.scores.data() + int64_t{r - r_cut} * kTileKeys, skip, n_row, sc.v_rows.data(), hd,
                  sc.part.data() + int64_t{r} * stride);
    }
  }
  return rows;
}

void set_q_rows(const Call& c, const SeqView& sv, int32_t kv_head, int32_t first_token,
                int32_t num_rows, AttnWorkspace::ThreadScratch& sc) {
  for (int32_t r = 0; r < num_rows; ++r) {
    const int64_t token = sv.q_begin + first_token + r / c.group;
    const int64_t head = int64_t{kv_head} * c.group + r % c.group;
    sc.q_rows[r] = c.q + (token * c.num_heads + head) * c.head_dim;
  }
}

// paged_attention_decode, for one split unit of a one-token sequence: its query rows rotated into
// the unit's scratch and, in the unit of the token's last partition (the only one that reads the
// new key), the token's K of kv_head rotated and written with its V before any tile reads them.
void take_fresh_token(const Call& c, const SeqView& sv, int32_t kv_head, int32_t part_index,
                      AttnWorkspace::ThreadScratch& sc) {
  const DecodeTokens& f = *c.fresh;
  const int32_t hd = c.head_dim;
  const int64_t token = sv.q_begin;
  const float* cs = f.rope_cs + token * hd;
  float* q = sc.q_rope.data();
  std::memcpy(q, c.q + (token * c.num_heads + int64_t{kv_head} * c.group) * hd, sizeof(float) * c.group * hd);
  rope_with_table(q, 1, c.group, hd, f.rope_layout, cs);
  for (int32_t r = 0; r < c.group; ++r) sc.q_rows[r] = q + int64_t{r} * hd;
  const int64_t slot = c.md.slot_mapping[token];
  if (part_index != sv.num_parts - 1 || slot < 0) return;
  const int64_t at = token * c.kv.num_kv_heads * hd + int64_t{kv_head} * hd;
  float* k = sc.k_rope.data();
  std::memcpy(k, f.k + at, sizeof(float) * hd);
  rope_with_table(k, 1, 1, hd, f.rope_layout, cs);
  write_kv_head(c.kv, slot, kv_head, k, f.v + at);
}

// Split schedule, phase 1: partials of one partition for all rows of the sequence (or, with a
// single partition, the rows' outputs: finish_split_row would fold nothing).
void run_split_unit(const Call& c, const SeqView& sv, float* partials, int32_t kv_head,
                    int32_t part_index, const KeyRange& after, AttnWorkspace::ThreadScratch& sc) {
  const int32_t num_rows = sv.q_len * c.group;
  const int32_t stride = state_stride(c.head_dim);
  if (c.fresh != nullptr) {
    take_fresh_token(c, sv, kv_head, part_index, sc);
  } else {
    set_q_rows(c, sv, kv_head, 0, num_rows, sc);
  }
  const RowRange rows = run_partition(c, sv, kv_head, 0, num_rows, part_index, after, sc);
  for (int32_t r = rows.begin; r < rows.end; ++r) {
    const int64_t token = r / c.group;
    const int64_t head = int64_t{kv_head} * c.group + r % c.group;
    const float* state = sc.part.data() + int64_t{r} * stride;
    if (sv.num_parts == 1) {  // nothing to fold: the division finish_split_row would do, here
      finish_row(state, c.head_dim, c.out + ((sv.q_begin + token) * c.num_heads + head) * c.head_dim);
      continue;
    }
    float* dst = partials + ((token * c.num_heads + head) * sv.num_parts + part_index) * stride;
    std::memcpy(dst, state, sizeof(float) * stride);
  }
}

// Split schedule, phase 2: fold the partials of one (token, head) in ascending order.
void finish_split_row(const Call& c, const SeqView& sv, const float* partials, int32_t token,
                      int32_t head, float* total) {
  const int32_t stride = state_stride(c.head_dim);
  const int32_t pos = sv.first_pos + token;
  const int32_t first_part_row = first_visible_key(c.kv, pos) / kPartitionKeys;
  const int32_t num_parts_row = pos / kPartitionKeys + 1;
  const float* base = partials + (int64_t{token} * c.num_heads + head) * sv.num_parts * stride;
  std::memcpy(total, base + int64_t{first_part_row} * stride, sizeof(float) * stride);
  for (int32_t k = first_part_row + 1; k < num_parts_row; ++k) {
    fold_state(total, base + int64_t{k} * stride, c.head_dim);
  }
  finish_row(total, c.head_dim,
             c.out + ((int64_t{sv.q_begin} + token) * c.num_heads + head) * c.head_dim);
}

// Tiled schedule: one query tile of one KV head group over all its partitions.
void run_tiled_unit(const Call& c, const SeqView& sv, int32_t kv_head, int32_t tile,
                    const KeyRange& after, AttnWorkspace::ThreadScratch& sc) {
  const int32_t first_token = tile * c.tile_tokens;
  const int32_t num_tokens = std::min(c.tile_tokens, sv.q_len - first_token);
  const int32_t num_rows = num_tokens * c.group;
  const int32_t stride = state_stride(c.head_dim);
  set_q_rows(c, sv, kv_head, first_token, num_rows, sc);
  const int32_t last_pos = sv.first_pos + first_token + num_tokens - 1;
  auto first_part_of_row = [&](int32_t r) {
    return first_visible_key(c.kv, sv.first_pos + first_token + r / c.group) / kPartitionKeys;
  };
  for (int32_t k = first_part_of_row(0); k <= last_pos / kPartitionKeys; ++k) {
    const int32_t next_lo = (k + 1) * kPartitionKeys;
    const KeyRange next_part{sv.blocks, kv_head, next_lo, std::min(kTileKeys, last_pos + 1 - next_lo)};
    const RowRange rows =
        run_partition(c, sv, kv_head, first_token, num_rows, k, next_lo <= last_pos ? next_part : after, sc);
    for (int32_t r = rows.begin; r < rows.end; ++r) {
      float* total = sc.total.data() + int64_t{r} * stride;
      const float* part = sc.part.data() + int64_t{r} * stride;
      if (k == first_part_of_row(r)) {
        std::memcpy(total, part, sizeof(float) * stride);
      } else {
        fold_state(total, part, c.head_dim);
      }
    }
  }
  for (int32_t r = 0; r < num_rows; ++r) {
    const int64_t token = sv.q_begin + first_token + r / c.group;
    const int64_t head = int64_t{kv_head} * c.group + r % c.group;
    finish_row(sc.total.data() + int64_t{r} * stride, c.head_dim,
               c.out + (token * c.num_heads + head) * c.head_dim);
  }
}

void validate(const KvLayer& kv, const AttnMetadata& md, int32_t num_heads) {
  TESSERA_CHECK(kv.num_kv_heads > 0 && num_heads % kv.num_kv_heads == 0,
                "num_heads {} not a multiple of num_kv_heads {}", num_heads, kv.num_kv_heads);
  TESSERA_CHECK(kv.head_dim > 0 && kv.block_size > 0, "bad KV layer shape");
  TESSERA_CHECK(md.num_seqs == 0 || md.query_start_loc[md.num_seqs] == md.num_tokens,
                "query_start_loc[num_seqs] {} != num_tokens {}",
                md.num_seqs ? md.query_start_loc[md.num_seqs] : 0, md.num_tokens);
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const int32_t q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    const int32_t num_blocks = md.block_table_indptr[s + 1] - md.block_table_indptr[s];
    TESSERA_CHECK(q_len >= 0 && q_len <= md.seq_lens[s], "seq {}: q_len {} > seq_len {}", s, q_len,
                  md.seq_lens[s]);
    TESSERA_CHECK(int64_t{num_blocks} * kv.block_size >= md.seq_lens[s],
                  "seq {}: {} blocks cannot hold {} tokens", s, num_blocks, md.seq_lens[s]);
  }
}

void run_flash(const KvLayer& kv, const AttnMetadata& md, const float* q, int32_t num_heads,
               float scale, float* out, ThreadPool& pool, AttnWorkspace& ws, const TileKernels& tk,
               const DecodeTokens* fresh = nullptr) {
  validate(kv, md, num_heads);
  const int32_t group = num_heads / kv.num_kv_heads;
  const int32_t tile_tokens = std::max<int32_t>(1, kRowsPerTile / group);
  const Call c{kv, md, q, out, num_heads, group, kv.head_dim, tile_tokens, scale, tk, fresh};
  const int32_t stride = state_stride(kv.head_dim);
  const int num_threads = pool.num_threads();
  ws.ensure_threads(num_threads, kv.head_dim, tile_tokens * group);
  ws.ensure_seqs(md.num_seqs, md.num_tokens);

  // Units and partial offsets per sequence.
  int64_t num_units = 0;
  size_t num_partial_floats = 0;
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const SeqView sv = seq_view(c, s);
    ws.unit_offset[s] = num_units;
    ws.partial_offset[s] = static_cast<int64_t>(num_partial_floats);
    if (sv.q_len == 0) continue;
    num_units += int64_t{kv.num_kv_heads} * (sv.split ? sv.num_parts - sv.first_part : sv.num_tiles);
    if (sv.split && sv.num_parts > 1) {
      num_partial_floats += size_t(sv.q_len) * num_heads * sv.num_parts * stride;
    }
    for (int32_t t = 0; t < sv.q_len; ++t) ws.token_seq[sv.q_begin + t] = s;
  }
  ws.unit_offset[md.num_seqs] = num_units;
  float* partials = ws.ensure_partials(num_partial_floats);
  const size_t per_thread = sizeof(float) * (size_t(kv.head_dim) * kTileKeys * 2 +
                                             size_t(tile_tokens) * group * (kTileKeys + 2 * stride) +
                                             (fresh != nullptr ? size_t(group + 1) * kv.head_dim : 0)) +
                            sizeof(float*) * (kTileKeys + size_t(tile_tokens) * group);
  ws.note_flash(per_thread * num_threads + num_partial_floats * sizeof(float) +
                sizeof(int64_t) * 2 * (md.num_seqs + 1) + sizeof(int32_t) * md.num_tokens);

  // Small steps run on the calling thread: waking the pool costs more than the work. (Rows do
  // not depend on which thread computes them, so this changes no bits.) Otherwise through
  // for_ranges: each thread streams a contiguous run of units and, once done, steals `grain` units
  // at a time from the back of the other's run, so a layer's threads finish within about one unit
  // of each other (fixed chunks of ~6 units left one thread idle for up to a chunk at the end of
  // every layer: probe_batched_attention --gap-us 300 4.89-5.05 -> 4.57-4.75 ms). It never waits
  // for a worker that has not started (on a loaded machine a descheduled worker would otherwise
  // cost a time slice per layer); each unit claims a scratch slot for its duration.
  int64_t work = 0;  // query rows x keys x heads
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const int32_t q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    const int32_t keys = kv.window > 0 ? std::min(md.seq_lens[s], kv.window + q_len) : md.seq_lens[s];
    work += int64_t{q_len} * keys * num_heads;
  }
  const bool run_inline = work * kv.head_dim < kInlineWork;
  auto on_pool = [&](int64_t n, int64_t grain, auto&& body) {
    if (run_inline) {
      body(int64_t{0}, n);
    } else {
      pool.for_ranges(n, grain, body);
    }
  };
  struct Unit {
    int32_t seq;
    SeqView sv;
    int32_t kv_head, index;  // index: partition (split) or reversed query tile (tiled)
  };
  auto unit_at = [&](int64_t u) {
    const int64_t* it = std::upper_bound(ws.unit_offset.data(), ws.unit_offset.data() + md.num_seqs + 1, u);
    const int32_t s = static_cast<int32_t>(it - ws.unit_offset.data()) - 1;
    const SeqView sv = seq_view(c, s);
    const int64_t local = u - ws.unit_offset[s];
    const int32_t per_head = sv.split ? sv.num_parts - sv.first_part : sv.num_tiles;
    const int32_t index = static_cast<int32_t>(local % per_head) + (sv.split ? sv.first_part : 0);
    return Unit{s, sv, static_cast<int32_t>(local / per_head), index};
  };
  // The first keys a unit reads (its partition's, or partition 0 for a tiled unit).
  auto first_keys = [&](const Unit& x) {
    const int32_t lo = x.sv.split ? x.index * kPartitionKeys : 0;
    return KeyRange{x.sv.blocks, x.kv_head, lo, std::min(kTileKeys, md.seq_lens[x.seq] - lo)};
  };
  // Pieces of consecutive units, so a thread knows the unit it runs next and its last tile
  // streams that unit's first keys in.
  on_pool(num_units, 1, [&](int64_t begin, int64_t end) {
    const int slot = ws.claim_slot();
    AttnWorkspace::ThreadScratch& sc = ws.threads[slot];
    for (int64_t u = begin; u < end; ++u) {
      const Unit x = unit_at(u);
      const KeyRange after = u + 1 < end ? first_keys(unit_at(u + 1)) : KeyRange{};
      if (x.sv.split) {
        run_split_unit(c, x.sv, partials + ws.partial_offset[x.seq], x.kv_head, x.index, after, sc);
      } else {
        const int32_t per_head = x.sv.num_tiles;
        run_tiled_unit(c, x.sv, x.kv_head, per_head - 1 - x.index, after, sc);  // costliest tiles first
      }
    }
    ws.release_slot(slot);
  });
  if (num_partial_floats == 0) return;
  // Phase 2: fold each split row's partials (items = token x head). A piece folds at least about
  // 256 partitions (~10 us), so one decode sequence's fold stays on the calling thread.
  const int64_t num_items = int64_t{md.num_tokens} * num_heads;
  const int64_t num_partial_states = static_cast<int64_t>(num_partial_floats / stride);
  const int64_t parts_per_item = std::max<int64_t>(1, num_partial_states / std::max<int64_t>(1, num_items));
  const int64_t fold_chunk = std::max<int64_t>(1, 256 / parts_per_item);
  on_pool(num_items, fold_chunk, [&](int64_t begin, int64_t end) {
    const int slot = ws.claim_slot();
    float* total = ws.threads[slot].total.data();
    for (int64_t i = begin; i < end; ++i) {
      const int32_t token = static_cast<int32_t>(i / num_heads);
      const int32_t head = static_cast<int32_t>(i % num_heads);
      const int32_t s = ws.token_seq[token];
      const SeqView sv = seq_view(c, s);
      if (!sv.split || sv.num_parts == 1) continue;  // finished by its unit
      finish_split_row(c, sv, partials + ws.partial_offset[s], token - sv.q_begin, head, total);
    }
    ws.release_slot(slot);
  });
}

const TileKernels& pick_kernels(int32_t head_dim) {
  const IsaLevel level = isa_level();
  if (level >= IsaLevel::kAvx512) {
    if (const TileKernels* t = attn_detail::tile_kernels_avx512(head_dim)) return *t;
  }
  if (level >= IsaLevel::kAvx2) {
    if (const TileKernels* t = attn_detail::tile_kernels_avx2(head_dim)) return *t;
  }
  return attn_detail::tile_kernels_ref();
}

}  // namespace

#if defined(TESSERA_FORCE_SCALAR)
namespace attn_detail {
const TileKernels* tile_kernels_avx2(int32_t) { return nullptr; }
const TileKernels* tile_kernels_avx512(int32_t) { return nullptr; }
}  // namespace attn_detail
#endif

void paged_attention(const KvLayer& kv, const AttnMetadata& md, const float* q, int32_t num_heads,
                     float scale, float* out, ThreadPool& pool, AttnWorkspace& ws) {
  run_flash(kv, md, q, num_heads, scale, out, pool, ws, pick_kernels(kv.head_dim));
}

bool is_single_token_step(const AttnMetadata& md) {
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    if (md.query_start_loc[s + 1] - md.query_start_loc[s] != 1) return false;
  }
  return true;
}

void paged_attention_decode(const KvLayer& kv, const AttnMetadata& md, const float* q, const DecodeTokens& fresh,
                            int32_t num_heads, float scale, float* out, ThreadPool& pool, AttnWorkspace& ws) {
  TESSERA_CHECK(is_single_token_step(md), "paged_attention_decode: a sequence has other than one query row");
  TESSERA_CHECK(fresh.k != nullptr && fresh.v != nullptr && fresh.rope_cs != nullptr,
                "paged_attention_decode: missing k, v or rope table");
  run_flash(kv, md, q, num_heads, scale, out, pool, ws, pick_kernels(kv.head_dim), &fresh);
}

void paged_attention_ref(const KvLayer& kv, const AttnMetadata& md, const float* q,
                         int32_t num_heads, float scale, float* out, ThreadPool& pool,
                         AttnWorkspace& ws) {
  run_flash(kv, md, q, num_heads, scale, out, pool, ws, attn_detail::tile_kernels_ref());
}

}  // namespace tessera::kernels
