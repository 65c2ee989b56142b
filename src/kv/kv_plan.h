// KvPlan: KV-cache sizing math, the numbers behind `tessera kv-plan` and the engine's start-up line.
//   bytes_per_token = 2 (K and V) x num_layers x num_kv_heads x head_dim x bytes(kv dtype)
//   num_blocks      = floor((memory - weights) / (bytes_per_token x block_size))
//   max_concurrency = num_blocks / ceil(context / block_size)   requests of `context` tokens
// and, side by side, a contiguous cache that reserves `context` slots per request whatever the
// request really uses (`avg_tokens`), against paged blocks that waste < block_size slots each.
// Units: GPU memory is sold in binary units (an "80 GB" A100 has 80 GiB), so size strings with
// K/M/G/T[i][B] are powers of 1024; preset weights are parameter count x bytes per weight.
// GQA/MQA: only num_kv_heads enters the cache size (MQA is num_kv_heads = 1).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/byte_size.h"  // parse_byte_size: --memory, --weights
#include "util/dtype.h"
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

// The named presets: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b, mistral-7b,
// smollm2-135m, tinyllama-1.1b.
const std::vector<KvModelShape>& kv_model_presets();
std::optional<KvModelShape> find_kv_preset(std::string_view name);  // case-insensitive

struct KvPlanInput {
  KvModelShape shape;
  DType kv_dtype = DType::F16;       // cache element type
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
  int64_t bytes_per_sequence_freed = 0;  // local layers keep only their window's blocks
  int64_t concurrency_windows_freed = 0;  // kv_budget / bytes_per_sequence_freed
  bool has_budget = false;             // --memory given: the budget rows are meaningful
};

Result<KvPlan> compute_kv_plan(const KvPlanInput& input);

std::string render_kv_plan_table(const KvPlan& plan);  // human-readable table
std::string render_kv_plan_json(const KvPlan& plan);   // one JSON object

// The `kv-plan` subcommand: argv[0] is the subcommand name. Flags: --preset NAME | --layers N
// --kv-heads N --head-dim N [--heads N]; --memory SIZE, --weights SIZE, --context N,
// --avg-tokens N, --kv-dtype f16|bf16|f32|q8_0|..., --block-size N, --local-layers N --window W,
// --json, --list-presets.
// Prints to stdout (errors to stderr); returns the process exit code.
int run_kv_plan(int argc, char** argv);
// Same parsing without side effects, for tests and for callers that add their own flags.
Result<KvPlanInput> parse_kv_plan_args(const std::vector<std::string>& args, bool* json_out);

}  // namespace tessera::kv
