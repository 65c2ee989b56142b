// The engine's configuration has one source, the public EngineConfig (include/tessera/engine.h,
// defaults in tessera/engine_defaults.h). Every inner config (scheduler, runner, speculator,
// proposers) and the KV sizing are derived from it here, by one function, once at create time;
// nothing else copies fields from EngineConfig.
#pragma once
#include <cstdint>

#include "kv/kv_cache_layout.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "speculative/spec_decoder.h"
#include "tessera/engine.h"
#include "util/kv_dtype.h"

namespace tessera {

struct EngineConfigs {
  int32_t max_model_len = 0;          // context per request in force: EngineConfig's, or the
                                      // model's capped at defaults::kMaxModelLen
  KvDType kv_dtype = KvDType::kF16;   // parse_kv_dtype(EngineConfig::kv_dtype)
  int64_t bytes_per_token = 0;        // KV bytes of one token, K and V of every layer
  // The model's layers in KV-cache groups (sliding-window layers apart unless
  // EngineConfig::hybrid_kv_cache is off); a block holds kv_layout.num_slots layers.
  kv::KvCacheLayout kv_layout;
  int64_t block_bytes = 0;            // one block: block_size tokens x num_slots layers' K and V
  int32_t num_blocks = 0;             // KV blocks, the null block included (usable: num_blocks - 1)
  int32_t num_threads = 0;            // compute threads in force
  sched::SchedulerConfig scheduler;
  RunnerConfig runner;
  // Speculation (EngineConfig::speculative; used when it is not ""): the speculator and the
  // proposer it names.
  speculative::SpecDecoderConfig spec;
};

// The checks that need no model (kInvalidArgument): block size, KV dtype, policy, speculation.
Status validate_engine_config(const EngineConfig& config);

// Every inner config from `config`, for a model of `model`'s shape and context; the KV budget is
// config.kv_cache_bytes, or (when 0) config.kv_cache_memory_fraction of available_memory_bytes
// capped at 4 GiB; the token budget config.max_num_batched_tokens, or (when 0) derived from chunked
// prefill and max_model_len (see EngineConfig). Errors: a budget that holds no block; a scheduler config it refuses.
Result<EngineConfigs> derive_engine_configs(const EngineConfig& config, const ModelConfig& model,
                                            int64_t available_memory_bytes);

}  // namespace tessera
