// The sampling flags of every command that generates (run, chat): each knob is remembered only when
// the user set it, so the ones left unset take the model's recommended value
// (ModelInfo::default_sampling: the GGUF's general.sampling.* keys, else llama.cpp's defaults),
// which is known only once the model is loaded. --temperature 0 is greedy.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/sampling_params.h"

namespace tessera::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;

  // `defaults` with every knob the user set put over it.
  SamplingParams resolve(const SamplingParams& defaults) const;
  // Sets one knob by its name, as the chat REPL's `/set NAME VALUE` does ("temperature", "top_k",
  // "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed").
  // Returns an error text ("" on success) for an unknown name or a value that does not parse or is
  // out of range.
  std::string set(const std::string& name, const std::string& value);
};

void add_sampling_flags(CLI::App& app, SamplingFlags& flags);

// "temperature 0.80, top_k 40, top_p 0.95, min_p 0.05, repetition_penalty 1.00" (+ seed when set)
std::string describe_sampling(const SamplingParams& params);

}  // namespace tessera::cli
