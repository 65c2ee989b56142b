// Flags shared by every command that creates an Engine (tessera run, serve, bench): model, threads, KV
// cache, batching knobs, speculation.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "tessera/engine.h"

namespace tessera::server {

// "512MiB", "2GB", "1g", "1048576" -> bytes; -1 when malformed.
int64_t parse_byte_size(const std::string& text);

void add_engine_flags(CLI::App& app, EngineConfig& config, std::string& kv_cache_text);
// Fills defaults that need the flags' values (default model, KV budget text). Error text on failure.
std::string finish_engine_flags(EngineConfig& config, const std::string& kv_cache_text);

}  // namespace tessera::server
