#include "kv/kv_plan.h"

#include <algorithm>
#include <cmath>

#include "kv/kv_cache_layout.h"

namespace tessera::kv {

Result<KvPlan> compute_kv_plan(const KvPlanInput& input) {
  KvPlan plan;
  plan.input = input;
  KvPlanInput& in = plan.input;
  const KvModelShape& shape = in.shape;
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "need layers, kv heads and head dim > 0 (got {}, {}, {})", shape.num_layers,
                      shape.num_kv_heads, shape.head_dim);
  }
  if (in.block_size <= 0) {
    return make_error(ErrorCode::kInvalidArgument, "block size must be > 0, got {}", in.block_size);
  }
  if (in.context <= 0) in.context = shape.max_context;
  if (in.context <= 0) {
    return make_error(ErrorCode::kInvalidArgument, "need --context (the shape has no default)");
  }
  if (in.avg_tokens <= 0) in.avg_tokens = in.context;
  if (in.avg_tokens > in.context) {
    return make_error(ErrorCode::kInvalidArgument, "avg tokens {} exceed the context {}",
                      in.avg_tokens, in.context);
  }
  if (in.weight_bytes < 0) in.weight_bytes = static_cast<int64_t>(std::llround(shape.num_params * 2));
  if (shape.num_local_layers < 0 || shape.num_local_layers > shape.num_layers ||
      (shape.num_local_layers > 0) != (shape.sliding_window > 0)) {
    return make_error(ErrorCode::kInvalidArgument, "{} local layers with a window of {} (of {} layers)",
                      shape.num_local_layers, shape.sliding_window, shape.num_layers);
  }

  const int64_t row_bytes = kv_row_bytes(in.kv_dtype, shape.head_dim);  // the engine's KvStorage rows
  plan.bytes_per_token = 2 * int64_t{shape.num_layers} * shape.num_kv_heads * row_bytes;
  plan.bytes_per_block = plan.bytes_per_token * in.block_size;
  plan.blocks_per_request = (in.context + in.block_size - 1) / in.block_size;
  plan.bytes_per_token_local = 2 * int64_t{shape.num_local_layers} * shape.num_kv_heads * row_bytes;
  plan.bytes_per_token_global = plan.bytes_per_token - plan.bytes_per_token_local;
  plan.local_blocks_per_request =
      shape.num_local_layers == 0
          ? plan.blocks_per_request
          : std::min<int64_t>(plan.blocks_per_request, (shape.sliding_window - 1 + in.block_size - 1) / in.block_size + 1);
  plan.bytes_per_sequence_kept = plan.bytes_per_block * plan.blocks_per_request;
  // Freed: the engine's layout (kv_cache_layout.h): groups of layers_per_block layers, a block of a
  // group holding that many layers' K/V (a type's short last group leaves slots unused).
  std::vector<int32_t> layer_windows(static_cast<size_t>(shape.num_layers), 0);
  std::fill_n(layer_windows.begin(), shape.num_local_layers, shape.sliding_window);
  const KvCacheLayout layout = plan_kv_cache_layout(layer_windows);
  plan.num_kv_cache_groups = layout.num_groups();
  plan.layers_per_block = layout.num_slots;
  int64_t blocks_freed = 0;
  for (int32_t w : layout.group_windows) blocks_freed += w == 0 ? plan.blocks_per_request : plan.local_blocks_per_request;
  const int64_t layer_block_bytes = plan.bytes_per_block / shape.num_layers;  // one layer's K/V of a block
  plan.bytes_per_sequence_freed = layer_block_bytes * layout.num_slots * blocks_freed;
  plan.has_budget = in.memory_bytes > 0;
  if (!plan.has_budget) return plan;  // bytes per token and per sequence only
  plan.kv_budget_bytes = in.memory_bytes - in.weight_bytes;
  if (plan.kv_budget_bytes <= 0) {
    return make_error(ErrorCode::kOutOfRange,
                      "the weights ({} bytes) leave no memory for the KV cache ({} bytes given)",
                      in.weight_bytes, in.memory_bytes);
  }
  plan.num_blocks = plan.kv_budget_bytes / plan.bytes_per_block;
  plan.concurrency_windows_freed = plan.kv_budget_bytes / plan.bytes_per_sequence_freed;
  plan.max_concurrency = plan.num_blocks / plan.blocks_per_request;
  plan.max_concurrency_exact = static_cast<double>(plan.kv_budget_bytes) /
                               (static_cast<double>(plan.bytes_per_token) * in.context);
  plan.contiguous_concurrency = plan.kv_budget_bytes / (plan.bytes_per_token * in.context);
  plan.contiguous_waste = 1.0 - static_cast<double>(in.avg_tokens) / in.context;
  const int64_t avg_blocks = (in.avg_tokens + in.block_size - 1) / in.block_size;
  plan.paged_concurrency = plan.num_blocks / avg_blocks;
  plan.paged_waste = 1.0 - static_cast<double>(in.avg_tokens) /
                               static_cast<double>(avg_blocks * in.block_size);
  return plan;
}

int64_t kv_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t num_computed,
                       int64_t num_tokens) {
  const int64_t entries = (num_tokens + block_size - 1) / block_size;
  int64_t held = 0;
  for (int32_t w : windows) {
    const int64_t released = w == 0 ? 0 : std::max<int64_t>(0, num_computed - w + 1) / block_size;
    held += entries - std::min(entries, released);
  }
  return held;
}

}  // namespace tessera::kv
