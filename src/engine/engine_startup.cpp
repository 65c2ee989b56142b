// What EngineImpl::create derives from the model and the configs, and prints: see engine_startup.h.
#include "engine/engine_startup.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "kv/kv_plan.h"

namespace tessera {

namespace {

// Requests of max_model_len tokens the cache holds while they decode: the blocks of a full group
// are ceil(L / bs) per request, a sliding group's at most its window's (kv::max_kv_blocks_held, one
// token per step); one full group gives (blocks x bs) / L.
double full_context_concurrency(std::span<const int32_t> windows, int32_t num_blocks, int32_t block_size,
                                int32_t max_model_len) {
  double per_request = 0.0;
  for (int32_t w : windows) {
    const double full = static_cast<double>(max_model_len) / block_size;
    const int32_t one[] = {w};
    per_request += w == 0 ? full
                          : std::min(full, static_cast<double>(kv::max_kv_blocks_held(one, block_size, max_model_len, 1)));
  }
  return per_request > 0 ? num_blocks / per_request : 0.0;
}

// ModelInfo::default_sampling: the file's recommendations over llama.cpp's defaults; *source says
// which of the two the five knobs came from.
SamplingParams default_sampling(const RecommendedSampling& r, std::string* source) {
  SamplingParams p;
  p.temperature = r.temperature.value_or(defaults::kTemperature);
  p.top_k = r.top_k.value_or(defaults::kTopK);
  p.top_p = r.top_p.value_or(defaults::kTopP);
  p.min_p = r.min_p.value_or(defaults::kMinP);
  p.repetition_penalty = r.repetition_penalty.value_or(defaults::kRepetitionPenalty);
  const bool all = r.temperature && r.top_k && r.top_p && r.min_p && r.repetition_penalty;
  *source = all ? "model file" : r.any() ? "model file + llama.cpp defaults" : "llama.cpp defaults";
  return p;
}

}  // namespace

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return int64_t{8} << 30;
}

ModelInfo make_model_info(const EngineConfig& config, const LlamaModel& model, const tokenizer::Tokenizer& tok,
                          const EngineConfigs& d) {
  const ModelConfig& mc = model.config();
  ModelInfo info;
  info.name = mc.name;
  info.architecture = mc.architecture;
  info.path = config.model_path;
  info.vocab_size = mc.vocab_size;
  info.context_length = d.max_model_len;
  info.num_layers = mc.num_layers;
  info.dim = mc.dim;
  info.num_heads = mc.num_heads;
  info.num_kv_heads = mc.num_kv_heads;
  info.head_dim = mc.head_dim;
  info.bos_id = tok.bos_id();
  info.eos_id = tok.eos_id();
  info.add_bos = tok.add_bos();
  info.weight_bytes = model.weight_bytes_per_pass();
  info.kv_cache_bytes = static_cast<int64_t>(d.num_blocks - 1) * d.block_bytes;
  info.num_kv_blocks = d.num_blocks - 1;
  info.block_size = config.block_size;
  info.max_concurrency = full_context_concurrency(d.kv_layout.group_windows, d.num_blocks - 1, config.block_size,
                                                  d.max_model_len);
  info.kv_cache_group_windows = d.kv_layout.group_windows;
  info.kv_layers_per_block = d.kv_layout.num_slots;
  info.kv_dtype = kv_dtype_name(d.kv_dtype);
  info.enable_prefix_caching = config.enable_prefix_caching;
  info.max_num_seqs = d.scheduler.max_num_seqs;
  info.max_num_batched_tokens = d.scheduler.max_num_batched_tokens;
  info.default_sampling = default_sampling(mc.sampling, &info.default_sampling_source);
  return info;
}

// The start-up summary (EngineConfig::verbose): the model and kernels, the KV cache in force, and
// for models with sliding-window layers how its blocks are laid out (kv/kv_cache_layout.h).
void print_startup_lines(const ModelInfo& info, const ModelConfig& mc, const EngineConfigs& d,
                         const EngineConfig& config) {
  std::fprintf(stderr,
               "tessera: model %s (%s; %d query heads), %d threads, kernels %s\n"
               "tessera: KV cache %.1f MiB (%s, %lld bytes/token over %d layers): %d blocks of %d tokens x %d "
               "layers, %.1f requests at the full context of %d tokens\n",
               info.name.c_str(), mc.describe().c_str(), info.num_heads, d.num_threads,
               std::string(LlamaModel::kernels_isa()).c_str(), static_cast<double>(info.kv_cache_bytes) / (1 << 20),
               kv_dtype_name(d.kv_dtype), static_cast<long long>(d.bytes_per_token), mc.num_layers,
               info.num_kv_blocks, info.block_size, info.kv_layers_per_block, info.max_concurrency,
               info.context_length);
  const SamplingParams& s = info.default_sampling;
  std::fprintf(stderr, "tessera: default sampling (%s): temperature %.2f, top_k %d, top_p %.2f, min_p %.2f, "
               "repetition_penalty %.2f\n", info.default_sampling_source.c_str(), s.temperature, s.top_k, s.top_p,
               s.min_p, s.repetition_penalty);
  if (mc.num_local_layers() == 0) return;
  kv::KvPlanInput in;  // the per-sequence bytes with and without freeing (kv/ KvPlan's arithmetic)
  in.shape = {mc.name, mc.num_layers, mc.num_heads, mc.num_kv_heads, mc.head_dim, info.context_length, 0,
              mc.num_local_layers(), mc.sliding_window};
  in.context = info.context_length;
  in.block_size = config.block_size;
  in.kv_dtype = d.kv_dtype;  // q8 sized as KvStorage stores it (kv_row_bytes)
  auto plan = kv::compute_kv_plan(in);
  if (!plan) return;
  const double kept_mib = static_cast<double>(plan->bytes_per_sequence_kept) / (1 << 20);
  const double freed_mib = static_cast<double>(plan->bytes_per_sequence_freed) / (1 << 20);
  const auto& windows = d.kv_layout.group_windows;
  if (std::any_of(windows.begin(), windows.end(), [](int32_t w) { return w > 0; })) {
    std::fprintf(stderr,
                 "tessera: KV layout: %d local layers (%d-token window) + %d global in %d KV-cache group(s) of %d "
                 "layers, blocks behind a window go back to the pool: %.1f MiB per full-context sequence "
                 "(%.1f MiB if every block were kept)\n",
                 mc.num_local_layers(), mc.sliding_window, mc.num_layers - mc.num_local_layers(),
                 d.kv_layout.num_groups(), d.kv_layout.num_slots, freed_mib, kept_mib);
  } else {
    std::fprintf(stderr,
                 "tessera: KV layout: %d local layers (%d-token window, attention skips keys before it) + %d "
                 "global, one block table for all layers%s: %.1f MiB per full-context sequence (%.1f MiB with "
                 "the blocks behind the window freed)\n",
                 mc.num_local_layers(), mc.sliding_window, mc.num_layers - mc.num_local_layers(),
                 config.hybrid_kv_cache ? "" : " (hybrid KV cache off)", kept_mib, freed_mib);
  }
}


}  // namespace tessera
