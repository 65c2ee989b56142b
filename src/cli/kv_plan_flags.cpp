// kv-plan's command line: the named model shapes, the flags, and the table and JSON it prints.
// The sizing math is kv/'s (compute_kv_plan).
#include "cli/kv_plan_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <nlohmann/json.hpp>

#include "util/byte_size.h"

namespace tessera::cli {

using kv::compute_kv_plan;
using kv::KvModelShape;
using kv::KvPlan;
using kv::KvPlanInput;

const std::vector<KvModelShape>& kv_model_presets() {
  // Shapes from each model's published config.json; num_params from its model card.
  static const std::vector<KvModelShape> presets = {
      {"llama-2-7b", 32, 32, 32, 128, 4096, 6.74e9},
      {"llama-2-13b", 40, 40, 40, 128, 4096, 13.02e9},
      {"llama-2-70b", 80, 64, 8, 128, 4096, 68.98e9},
      {"llama-3-8b", 32, 32, 8, 128, 8192, 8.03e9},
      {"llama-3-70b", 80, 64, 8, 128, 8192, 70.55e9},
      {"mistral-7b", 32, 32, 8, 128, 32768, 7.24e9},
      {"smollm2-135m", 30, 9, 3, 64, 8192, 134.5e6},
      {"tinyllama-1.1b", 22, 32, 4, 64, 2048, 1.1e9},
  };
  return presets;
}

std::optional<KvModelShape> find_kv_preset(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& preset : kv_model_presets()) {
    if (preset.name == lower) return preset;
  }
  return std::nullopt;
}

namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

}  // namespace

std::string render_kv_plan_table(const KvPlan& plan) {
  const KvPlanInput& in = plan.input;
  const KvModelShape& s = in.shape;
  std::string out;
  out += fmt::format("model            {}: {} layers, {} heads, {} kv heads{}, head dim {}\n", s.name,
                     s.num_layers, s.num_heads, s.num_kv_heads,
                     s.num_kv_heads == 1 ? " (MQA)"
                     : (s.num_heads > s.num_kv_heads ? fmt::format(" (GQA {}:1)", s.num_heads / s.num_kv_heads) : ""),
                     s.head_dim);
  out += fmt::format("kv dtype         {}, block size {} tokens\n", kv_dtype_name(in.kv_dtype),
                     in.block_size);
  out += fmt::format("bytes per token  {} ({})\n", plan.bytes_per_token,
                     human_bytes(static_cast<double>(plan.bytes_per_token)));
  if (s.num_local_layers > 0) {
    out += fmt::format("  per layer type {} global layers {} B/token; {} local layers (window {}) {} B/token\n",
                       s.num_layers - s.num_local_layers, plan.bytes_per_token_global, s.num_local_layers,
                       s.sliding_window, plan.bytes_per_token_local);
  }
  out += fmt::format("bytes per seq    {} ({}) at {} tokens, every layer keeping every block\n",
                     plan.bytes_per_sequence_kept, human_bytes(static_cast<double>(plan.bytes_per_sequence_kept)),
                     in.context);
  if (s.num_local_layers > 0) {
    out += fmt::format("                 {} ({}) with windows freed (local layers keep {} of {} blocks; {} KV-cache "
                       "groups of {} layers): {:.2f}x less\n",
                       plan.bytes_per_sequence_freed, human_bytes(static_cast<double>(plan.bytes_per_sequence_freed)),
                       plan.local_blocks_per_request, plan.blocks_per_request, plan.num_kv_cache_groups,
                       plan.layers_per_block, static_cast<double>(plan.bytes_per_sequence_kept) / plan.bytes_per_sequence_freed);
  }
  if (!plan.has_budget) return out + "(no --memory: no budget, blocks or concurrency)\n";
  out += fmt::format("memory           {} - weights {} = KV budget {}\n",
                     human_bytes(static_cast<double>(in.memory_bytes)),
                     human_bytes(static_cast<double>(in.weight_bytes)),
                     human_bytes(static_cast<double>(plan.kv_budget_bytes)));
  out += fmt::format("KV blocks        {} ({} tokens)\n", plan.num_blocks,
                     plan.num_blocks * in.block_size);
  out += fmt::format("concurrency      {} requests of {} tokens ({:.2f} unrounded)\n",
                     plan.max_concurrency, in.context, plan.max_concurrency_exact);
  if (s.num_local_layers > 0) {
    out += fmt::format("                 {} requests with windows freed ({:.2f}x)\n", plan.concurrency_windows_freed,
                       plan.max_concurrency > 0 ? static_cast<double>(plan.concurrency_windows_freed) / plan.max_concurrency
                                                : 0.0);
  }
  out += fmt::format("\nat {} tokens used per request (of {} reserved):\n", in.avg_tokens,
                     in.context);
  out += fmt::format("  {:<28} {:>12} {:>10}\n", "layout", "concurrency", "waste");
  out += fmt::format("  {:<28} {:>12} {:>9.1f}%\n", "contiguous (max-length)",
                     plan.contiguous_concurrency, 100.0 * plan.contiguous_waste);
  out += fmt::format("  {:<28} {:>12} {:>9.1f}%\n", fmt::format("paged ({}-token blocks)", in.block_size),
                     plan.paged_concurrency, 100.0 * plan.paged_waste);
  return out;
}

std::string render_kv_plan_json(const KvPlan& plan) {
  const KvPlanInput& in = plan.input;
  nlohmann::json j = {
      {"model", in.shape.name},
      {"num_layers", in.shape.num_layers},
      {"num_heads", in.shape.num_heads},
      {"num_kv_heads", in.shape.num_kv_heads},
      {"head_dim", in.shape.head_dim},
      {"kv_dtype", std::string(kv_dtype_name(in.kv_dtype))},
      {"block_size", in.block_size},
      {"context", in.context},
      {"avg_tokens", in.avg_tokens},
      {"memory_bytes", in.memory_bytes},
      {"weight_bytes", in.weight_bytes},
      {"kv_budget_bytes", plan.kv_budget_bytes},
      {"bytes_per_token", plan.bytes_per_token},
      {"bytes_per_block", plan.bytes_per_block},
      {"num_blocks", plan.num_blocks},
      {"max_concurrency", plan.max_concurrency},
      {"max_concurrency_exact", plan.max_concurrency_exact},
      {"contiguous_concurrency", plan.contiguous_concurrency},
      {"contiguous_waste", plan.contiguous_waste},
      {"paged_concurrency", plan.paged_concurrency},
      {"paged_waste", plan.paged_waste},
      {"num_local_layers", in.shape.num_local_layers},
      {"sliding_window", in.shape.sliding_window},
      {"bytes_per_token_global", plan.bytes_per_token_global},
      {"bytes_per_token_local", plan.bytes_per_token_local},
      {"bytes_per_sequence_kept", plan.bytes_per_sequence_kept},
      {"bytes_per_sequence_freed", plan.bytes_per_sequence_freed},
      {"concurrency_windows_freed", plan.concurrency_windows_freed},
      {"num_kv_cache_groups", plan.num_kv_cache_groups},
      {"layers_per_block", plan.layers_per_block},
      {"has_budget", plan.has_budget},
  };
  return j.dump() + "\n";
}

namespace {

struct ParsedFlags {
  std::string preset, memory, weights, kv_dtype = "f16";
  int32_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, context = 0, avg_tokens = 0;
  int32_t local_layers = 0, window = 0;
  int32_t block_size = 16;
  bool json = false, list_presets = false;
};

void add_flags(CLI::App& app, ParsedFlags& f) {
  app.add_option("--preset", f.preset, "named model shape (see --list-presets)");
  app.add_option("--layers", f.layers, "transformer layers");
  app.add_option("--heads", f.heads, "query heads (optional, for the GQA ratio)");
  app.add_option("--kv-heads", f.kv_heads, "key/value heads (1 = MQA)");
  app.add_option("--head-dim", f.head_dim, "elements per head");
  app.add_option("--memory", f.memory, "bytes for weights + KV, e.g. 80GiB (GiB = 2^30, GB = 10^9)");
  app.add_option("--weights", f.weights, "bytes the weights take, e.g. 26GB (default: params x 2)");
  app.add_option("--context", f.context, "tokens per request (default: the model's context)");
  app.add_option("--avg-tokens", f.avg_tokens, "tokens a request really uses (default: context)");
  app.add_option("--kv-dtype", f.kv_dtype, "KV element type: f16, f32 or q8 (as `serve --kv-dtype`)");
  app.add_option("--block-size", f.block_size, "tokens per KV block");
  app.add_option("--local-layers", f.local_layers, "layers with a sliding window (with --window)");
  app.add_option("--window", f.window, "tokens a local layer attends to");
  app.add_flag("--json", f.json, "one JSON object instead of the table");
  app.add_flag("--list-presets", f.list_presets, "print the preset names");
}

Result<KvPlanInput> to_input(const ParsedFlags& f) {
  KvPlanInput in;
  if (!f.preset.empty()) {
    auto preset = find_kv_preset(f.preset);
    if (!preset) return make_error(ErrorCode::kNotFound, "unknown preset '{}'", f.preset);
    in.shape = *preset;
  } else {
    in.shape.name = "custom";
  }
  if (f.layers > 0) in.shape.num_layers = f.layers;
  if (f.heads > 0) in.shape.num_heads = f.heads;
  if (f.kv_heads > 0) in.shape.num_kv_heads = f.kv_heads;
  if (f.head_dim > 0) in.shape.head_dim = f.head_dim;
  if (f.local_layers > 0) in.shape.num_local_layers = f.local_layers;
  if (f.window > 0) in.shape.sliding_window = f.window;
  if (f.preset.empty() && (f.layers <= 0 || f.kv_heads <= 0 || f.head_dim <= 0)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "give --preset NAME or all of --layers, --kv-heads, --head-dim");
  }
  if (f.preset.empty() && f.weights.empty()) in.weight_bytes = 0;
  if (!f.memory.empty()) {
    auto bytes = parse_byte_size(f.memory);
    if (!bytes) return bytes.error().with_context("--memory");
    in.memory_bytes = *bytes;
  }
  if (!f.weights.empty()) {
    auto bytes = parse_byte_size(f.weights);
    if (!bytes) return bytes.error().with_context("--weights");
    in.weight_bytes = *bytes;
  }
  auto dtype = parse_kv_dtype(f.kv_dtype);
  if (!dtype) return dtype.error().with_context("--kv-dtype");
  in.kv_dtype = *dtype;
  in.context = f.context;
  in.avg_tokens = f.avg_tokens;
  in.block_size = f.block_size;
  return in;
}

}  // namespace

Result<KvPlanInput> parse_kv_plan_args(const std::vector<std::string>& args, bool* json_out) {
  CLI::App app{"KV-cache sizing", "kv-plan"};
  ParsedFlags flags;
  add_flags(app, flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return make_error(ErrorCode::kInvalidArgument, "kv-plan: {}", e.what());
  }
  if (json_out != nullptr) *json_out = flags.json;
  return to_input(flags);
}

int run_kv_plan(int argc, char** argv) {
  CLI::App app{"KV-cache sizing: bytes per token, blocks and concurrency for a memory budget",
               "kv-plan"};
  ParsedFlags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (flags.list_presets) {
    for (const auto& p : kv_model_presets()) {
      std::cout << fmt::format("{:<16} {} layers, {} heads, {} kv heads, head dim {}, context {}\n",
                               p.name, p.num_layers, p.num_heads, p.num_kv_heads, p.head_dim,
                               p.max_context);
    }
    return 0;
  }
  auto input = to_input(flags);
  if (!input) {
    std::cerr << "kv-plan: " << input.error().message << "\n";
    return 2;
  }
  auto plan = compute_kv_plan(*input);
  if (!plan) {
    std::cerr << "kv-plan: " << plan.error().message << "\n";
    return 1;
  }
  std::cout << (flags.json ? render_kv_plan_json(*plan) : render_kv_plan_table(*plan));
  return 0;
}

}  // namespace tessera::cli
