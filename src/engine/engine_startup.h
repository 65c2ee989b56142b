// What EngineImpl::create derives from the loaded model and the derived configs, and what it
// prints at start-up (EngineConfig::verbose): the public ModelInfo, and the summary lines (model,
// kernels, the KV cache in force and, for sliding-window models, its layout).
#pragma once
#include <cstdint>

#include "engine/engine_config.h"
#include "model/llama_model.h"
#include "tessera/engine.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

// Bytes the OS reports available (/proc/meminfo MemAvailable); 8 GiB when it cannot be read.
int64_t available_memory_bytes();

// The engine's ModelInfo: the model's shape, the tokenizer's special ids, the KV cache and batch
// limits in force (`d`), the model file's recommended sampling over llama.cpp's defaults.
ModelInfo make_model_info(const EngineConfig& config, const LlamaModel& model, const tokenizer::Tokenizer& tok,
                          const EngineConfigs& d);

// The start-up summary lines on stderr.
void print_startup_lines(const ModelInfo& info, const ModelConfig& mc, const EngineConfigs& d,
                         const EngineConfig& config);

}  // namespace tessera
