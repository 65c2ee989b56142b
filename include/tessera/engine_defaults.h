// The default of every engine knob that more than one config carries, in one place: EngineConfig
// (tessera/engine.h) takes its defaults from here, and so do the inner configs the engine derives
// from it (sched::SchedulerConfig, RunnerConfig, spec::DraftProposerConfig, spec::NgramConfig), so
// a config built on its own (a test, a benchmark) starts from the same numbers as the engine's.
#pragma once
#include <cstdint>

namespace tessera::defaults {

inline constexpr int32_t kMaxNumSeqs = 64;            // sequences in one step at most
inline constexpr int32_t kMaxNumBatchedTokens = 512;  // tokens in one step at most (token budget)
inline constexpr int32_t kMaxModelLen = 8192;         // context per request when the model's is longer
inline constexpr int32_t kBlockSize = 16;             // token slots per KV block
inline constexpr int64_t kKvCacheDirBytes = int64_t{8} << 30;  // --kv-cache-dir-size when a dir is given
inline constexpr int32_t kNumSpeculativeTokens = 4;   // k, draft tokens per sequence and step at most
inline constexpr int32_t kMaxSamplesPerRequest = 16;  // n at most (parallel sampling)

// Sampling when neither the request nor the model file says otherwise: llama.cpp's defaults
// (common/common.h), the settings most GGUF users know. A file's general.sampling.* keys override
// each one it carries (ModelInfo::default_sampling).
inline constexpr float kTemperature = 0.8f;
inline constexpr int32_t kTopK = 40;
inline constexpr float kTopP = 0.95f;
inline constexpr float kMinP = 0.05f;
inline constexpr float kRepetitionPenalty = 1.0f;

}  // namespace tessera::defaults
