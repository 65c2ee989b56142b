// Flags shared by every command that creates an Engine (tessera run, serve, bench): model, threads, KV
// cache, batching knobs, speculation. --kv-cache sizes go through util/byte_size.h (GiB = 2^30, GB = 10^9).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "tessera/engine.h"

namespace tessera::cli {

void add_engine_flags(CLI::App& app, EngineConfig& config, std::string& kv_cache_text);
// Fills defaults that need the flags' values (default model, KV budget text). Error text on failure.
std::string finish_engine_flags(EngineConfig& config, const std::string& kv_cache_text);
// serve --lora-modules NAME=FILE ... into config.lora_modules. Error text on failure (no '=', an
// empty name or path, a name given twice).
std::string parse_lora_modules(const std::vector<std::string>& specs, EngineConfig& config);

}  // namespace tessera::cli
