#include "cli/sampling_flags.h"

#include <cmath>

#include <fmt/format.h>

namespace tessera::cli {
namespace {

// Ranges the engine accepts (sample::validate_sampling_params): a flag outside them is refused at
// parse time with the flag's name instead of at submit.
struct Knob {
  const char* name;
  double lo, hi;
};
constexpr Knob kTemperature{"temperature", 0.0, 100.0};
constexpr Knob kTopP{"top_p", 1e-9, 1.0};
constexpr Knob kMinP{"min_p", 0.0, 1.0};
constexpr Knob kRepetition{"repetition_penalty", 1e-9, 100.0};
constexpr Knob kPenalty{"penalty", -2.0, 2.0};

std::string check(const Knob& k, double v) {
  if (!std::isfinite(v) || v < k.lo || v > k.hi) return fmt::format("{} must be in [{}, {}]", k.name, k.lo, k.hi);
  return "";
}

}  // namespace

SamplingParams SamplingFlags::resolve(const SamplingParams& defaults) const {
  SamplingParams p = defaults;
  if (temperature) p.temperature = *temperature;
  if (top_k) p.top_k = *top_k;
  if (top_p) p.top_p = *top_p;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
  if (seed) p.seed = *seed;
  return p;
}

std::string SamplingFlags::set(const std::string& name, const std::string& value) {
  double v = 0.0;
  try {
    size_t used = 0;
    v = std::stod(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
  } catch (const std::exception&) {
    return fmt::format("'{}' is not a number", value);
  }
  auto assign = [&](const Knob& k, std::optional<float>* slot) {
    std::string err = check(k, v);
    if (err.empty()) *slot = static_cast<float>(v);
    return err;
  };
  if (name == "temperature" || name == "temp") return assign(kTemperature, &temperature);
  if (name == "top_p") return assign(kTopP, &top_p);
  if (name == "min_p") return assign(kMinP, &min_p);
  if (name == "repetition_penalty" || name == "repeat_penalty") return assign(kRepetition, &repetition_penalty);
  if (name == "presence_penalty") return assign(kPenalty, &presence_penalty);
  if (name == "frequency_penalty") return assign(kPenalty, &frequency_penalty);
  if (name == "top_k" || name == "seed") {
    if (v != std::floor(v) || v < (name == "top_k" ? -1.0 : 0.0) || v > 9.007199254740992e15) {
      return fmt::format("{} must be a whole number >= {}", name, name == "top_k" ? -1 : 0);
    }
    if (name == "top_k") {
      top_k = static_cast<int32_t>(std::min(v, 1e9));
    } else {
      seed = static_cast<uint64_t>(v);
    }
    return "";
  }
  return fmt::format("unknown setting '{}' (temperature, top_k, top_p, min_p, repetition_penalty, "
                     "presence_penalty, frequency_penalty, seed)", name);
}

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  auto range = [](const Knob& k) { return CLI::Range(k.lo, k.hi); };
  app.add_option("--temperature", f.temperature, "0 = greedy (default: the model's recommendation, else 0.8)")
      ->check(range(kTemperature));
  app.add_option("--top-k", f.top_k, "keep the k most likely tokens; 0 = all (default: the model's, else 40)")
      ->check(CLI::Range(-1, 1 << 30));
  app.add_option("--top-p", f.top_p, "nucleus sampling (default: the model's, else 0.95)")->check(range(kTopP));
  app.add_option("--min-p", f.min_p, "drop tokens below min_p x the top probability (default: the model's, else 0.05)")
      ->check(range(kMinP));
  app.add_option("--repetition-penalty", f.repetition_penalty, "CTRL-style penalty on seen tokens (default: the "
                 "model's, else 1.0 = off)")->check(range(kRepetition));
  app.add_option("--presence-penalty", f.presence_penalty)->check(range(kPenalty));
  app.add_option("--frequency-penalty", f.frequency_penalty)->check(range(kPenalty));
  app.add_option("--seed", f.seed, "sampling seed (default: the engine's, so runs repeat)");
}

std::string describe_sampling(const SamplingParams& p) {
  std::string s = fmt::format("temperature {:.2f}, top_k {}, top_p {:.2f}, min_p {:.2f}, repetition_penalty {:.2f}",
                              p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty);
  if (p.presence_penalty != 0.0f) s += fmt::format(", presence_penalty {:.2f}", p.presence_penalty);
  if (p.frequency_penalty != 0.0f) s += fmt::format(", frequency_penalty {:.2f}", p.frequency_penalty);
  if (p.seed) s += fmt::format(", seed {}", *p.seed);
  return s;
}

}  // namespace tessera::cli
