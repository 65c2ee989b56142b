#include "engine/engine_config.h"

#include <algorithm>

#include "model/kv_storage.h"
#include "util/thread_pool.h"

namespace tessera {

namespace {
constexpr int64_t kDefaultKvCapBytes = int64_t{4} << 30;
}  // namespace

Status validate_engine_config(const EngineConfig& config) {
  if (config.block_size < 1 || config.block_size > 1024) {
    return make_error(ErrorCode::kInvalidArgument, "block size {} must be in [1, 1024]", config.block_size);
  }
  TESSERA_TRY(parse_kv_dtype(config.kv_dtype));
  if (config.kv_cache_dir_bytes < 0) {
    return make_error(ErrorCode::kInvalidArgument, "KV cache dir size {} must be >= 0", config.kv_cache_dir_bytes);
  }
  if (config.max_loras < 1 || config.max_loras > 256) {
    return make_error(ErrorCode::kInvalidArgument, "max_loras {} must be in [1, 256]", config.max_loras);
  }
  if (config.lora_dtype != "auto" && config.lora_dtype != "f16" && config.lora_dtype != "f32") {
    return make_error(ErrorCode::kInvalidArgument, "lora_dtype '{}' must be auto, f16 or f32", config.lora_dtype);
  }
  if (config.max_lora_rank < 1 || config.max_lora_rank > 1024) {
    return make_error(ErrorCode::kInvalidArgument, "max_lora_rank {} must be in [1, 1024]", config.max_lora_rank);
  }
  if (config.policy != "continuous" && config.policy != "static") {
    return make_error(ErrorCode::kInvalidArgument, "policy '{}' must be continuous or static", config.policy);
  }
  if (!config.speculative.empty() && config.speculative != "ngram" && config.speculative != "draft") {
    return make_error(ErrorCode::kInvalidArgument, "speculative '{}' must be ngram or draft", config.speculative);
  }
  return ok_status();
}

Result<EngineConfigs> derive_engine_configs(const EngineConfig& config, const ModelConfig& model,
                                            int64_t available_memory_bytes) {
  TESSERA_TRY(validate_engine_config(config));
  EngineConfigs d;
  d.max_model_len = config.max_model_len > 0 ? std::min(config.max_model_len, model.context_length)
                                             : std::min(model.context_length, defaults::kMaxModelLen);
  d.kv_dtype = *parse_kv_dtype(config.kv_dtype);
  d.bytes_per_token = static_cast<int64_t>(KvStorage::bytes_per_token(model, d.kv_dtype));
  std::vector<int32_t> layer_windows(static_cast<size_t>(model.num_layers));
  for (int32_t l = 0; l < model.num_layers; ++l) layer_windows[static_cast<size_t>(l)] = model.window_of(l);
  d.kv_layout = kv::plan_kv_cache_layout(layer_windows, config.hybrid_kv_cache);
  int64_t budget = config.kv_cache_bytes;
  if (budget <= 0) {
    budget = std::min<int64_t>(static_cast<int64_t>(config.kv_cache_memory_fraction * available_memory_bytes),
                               kDefaultKvCapBytes);
  }
  d.block_bytes = static_cast<int64_t>(KvStorage::bytes_per_token_per_layer(model, d.kv_dtype)) *
                  d.kv_layout.num_slots * config.block_size;
  const int64_t num_usable_blocks = budget / d.block_bytes;
  if (num_usable_blocks < 1) {
    return make_error(ErrorCode::kInvalidArgument, "KV budget of {} bytes holds no block of {} bytes", budget,
                      d.block_bytes);
  }
  d.num_blocks = static_cast<int32_t>(std::min<int64_t>(num_usable_blocks + 1, int64_t{1} << 30));
  d.num_threads = config.num_threads > 0 ? config.num_threads : default_num_threads();

  sched::SchedulerConfig& sc = d.scheduler;
  sc.max_num_seqs = config.max_num_seqs;
  // The token budget: as given, or derived (vLLM's rule): without chunked prefill a prompt of
  // max_model_len tokens must fit one step.
  sc.max_num_batched_tokens = config.max_num_batched_tokens > 0 ? config.max_num_batched_tokens
                              : config.enable_chunked_prefill
                                  ? defaults::kMaxNumBatchedTokens
                                  : std::max(d.max_model_len, defaults::kMaxNumBatchedTokens);
  sc.max_model_len = d.max_model_len;
  sc.long_prefill_token_threshold = config.long_prefill_token_threshold;
  sc.enable_chunked_prefill = config.enable_chunked_prefill;
  sc.block_size = config.block_size;
  sc.num_blocks = d.num_blocks;
  sc.kv_group_windows = d.kv_layout.group_windows;
  sc.enable_prefix_caching = config.enable_prefix_caching;
  // The pool's stored/removed record: for KV events, and for the disk tier's writes.
  sc.record_block_events = static_cast<bool>(config.on_kv_events) || !config.kv_cache_dir.empty();
  sc.policy = config.policy == "static" ? sched::SchedulerPolicy::kStatic : sched::SchedulerPolicy::kContinuous;
  TESSERA_TRY(sched::validate_scheduler_config(sc));

  RunnerConfig& rc = d.runner;
  rc.max_num_batched_tokens = sc.max_num_batched_tokens;
  rc.max_num_seqs = config.max_num_seqs;
  rc.max_model_len = d.max_model_len;
  rc.max_num_spec_tokens = std::max(1, config.num_speculative_tokens);
  rc.max_num_samples = defaults::kMaxSamplesPerRequest;
  rc.num_threads = d.num_threads;

  d.spec.proposer = config.speculative;
  d.spec.draft_model_path = config.draft_model_path;
  d.spec.max_model_len = d.max_model_len;
  d.spec.vocab_size = model.vocab_size;
  speculative::SpeculatorConfig& spc = d.spec.speculator;
  spc.num_speculative_tokens = config.num_speculative_tokens;
  // Both wall-clock choices, the guard and the cost model, or neither (tests of exact counts).
  spc.speed_guard = config.speculative_speed_guard;
  spc.cost_model = config.speculative_speed_guard;

  d.spec.ngram.num_speculative_tokens = config.num_speculative_tokens;

  speculative::DraftProposerConfig& dc = d.spec.draft;
  dc.num_speculative_tokens = config.num_speculative_tokens;
  dc.max_num_seqs = std::max(1, std::min(sc.max_num_seqs, spc.max_batch_for_spec));
  dc.max_num_batched_tokens = std::max(sc.max_num_batched_tokens, dc.max_num_seqs);
  dc.max_model_len = sc.max_model_len;
  dc.block_size = sc.block_size;
  dc.kv_dtype = d.kv_dtype;
  dc.num_threads = rc.num_threads;
  dc.seed = config.seed ^ 0x9e3779b97f4a7c15ULL;
  return d;
}

}  // namespace tessera
