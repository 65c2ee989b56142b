// KvPlan: KV-cache sizing math, the numbers behind `tessera kv-plan` (whose flags, presets and
// output are cli/kv_plan_flags.h) and the engine's start-up line.
//   bytes_per_token = 2 (K and V) x num_layers x num_kv_heads x kv_row_bytes(kv dtype, head_dim)
//                     (head_dim x element bytes, + 4 for q8's row scale: util/kv_dtype.h)
//   num_blocks      = floor((memory - weights) / (bytes_per_token x block_size))
//   max_concurrency = num_blocks / ceil(context / block_size)   requests of `context` tokens
// and, side by side, a contiguous cache that reserves `context` slots per request whatever the
// request really uses (`avg_tokens`), against paged blocks that waste < block_size slots each.
// Units: GPU memory is sold in binary units (an "80 GB" A100 has 80 GiB), so size strings with
// K/M/G/T[i][B] are powers of 1024; preset weights are parameter count x bytes per weight.
// GQA/MQA: only num_kv_heads enters the cache size (MQA is num_kv_heads = 1).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/kv_dtype.h"
#include "util/status.h"

namespace tessera::kv {

struct KvModelShape {
  std::string name;          // preset name, or "custom"
  int32_t num_layers = 0;    // transformer blocks
  int32_t num_heads = 0;     // query heads (for the GQA ratio shown; 0 if unknown)
  int32_t num_kv_heads = 0;  // key/value heads
  int32_t head_dim = 0;      // elements per head
  int32_t max_context = 0;   // trained context length, tokens (0 if unknown)
  double num_params = 0;     // parameters, for default weight bytes (0 if unknown)
  // Sliding-window layers (Gemma 3: 5 of every 6): each needs only the blocks that touch its last
  // `sliding_window` positions once the blocks before are given back.
  int32_t num_local_layers = 0;
  int32_t sliding_window = 0;
};

struct KvPlanInput {
  KvModelShape shape;
  KvDType kv_dtype = KvDType::kF16;  // cache element type
  int64_t memory_bytes = 0;          // device (or RAM) bytes available to weights + KV; 0 = none
                                     // given: only the bytes per token and per sequence
  int64_t weight_bytes = -1;         // bytes the weights take; -1 = num_params x 2 (fp16)
  int32_t context = 0;               // tokens per request; 0 = shape.max_context
  int32_t avg_tokens = 0;            // tokens a request really uses; 0 = context
  int32_t block_size = 16;           // tokens per KV block
};

struct KvPlan {
  KvPlanInput input;                 // with defaults resolved (weights, context, avg_tokens)
  int64_t bytes_per_token = 0;       // K and V of one token, all layers
  int64_t bytes_per_block = 0;       // bytes_per_token x block_size
  int64_t kv_budget_bytes = 0;       // memory - weights
  int64_t num_blocks = 0;            // floor(kv_budget / bytes_per_block)
  int64_t blocks_per_request = 0;    // ceil(context / block_size)
  int64_t max_concurrency = 0;       // num_blocks / blocks_per_request (paged, full context)
  double max_concurrency_exact = 0;  // kv_budget / (bytes_per_token x context), unrounded
  // Side by side at avg_tokens per request:
  int64_t contiguous_concurrency = 0;  // budget / (bytes_per_token x context): reserves max length
  double contiguous_waste = 0;         // fraction of reserved slots never used: 1 - avg/context
  int64_t paged_concurrency = 0;       // num_blocks / ceil(avg_tokens / block_size)
  double paged_waste = 0;              // fraction of allocated slots unused (< 1 block each)
  // Per layer type, at `context` tokens per sequence (block-rounded):
  int64_t bytes_per_token_global = 0;  // K and V of one token over the global (full) layers
  int64_t bytes_per_token_local = 0;   // ... over the sliding-window layers
  int64_t local_blocks_per_request = 0;  // blocks a local layer holds with windows freed:
                                         // min(blocks_per_request, ceil((window - 1) / bs) + 1)
  int64_t bytes_per_sequence_kept = 0;   // every layer keeps every block: bytes_per_block x blocks
  int64_t bytes_per_sequence_freed = 0;  // local layers keep only their window's blocks, in the
                                         // engine's layout (kv_cache_layout.h):
  int32_t num_kv_cache_groups = 1;       // block tables per sequence with windows freed
  int32_t layers_per_block = 0;          // layers whose K/V one block of a group holds
  int64_t concurrency_windows_freed = 0;  // kv_budget / bytes_per_sequence_freed
  bool has_budget = false;             // --memory given: the budget rows are meaningful
};

Result<KvPlan> compute_kv_plan(const KvPlanInput& input);

// Blocks one sequence holds over its KV-cache groups (KvCacheManager::num_blocks_held) once
// positions [0, num_tokens) are allocated with num_computed of them computed before that step:
// every group has ceil(num_tokens / block_size) entries, and a sliding group (window W > 0) has
// given back the first floor(max(0, num_computed - W + 1) / block_size). windows: [num_groups],
// tokens, 0 = full attention. Decode at T tokens: kv_blocks_held(windows, bs, T - 1, T).
int64_t kv_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t num_computed,
                       int64_t num_tokens);

}  // namespace tessera::kv
