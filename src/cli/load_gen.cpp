// Workload, arrivals and statistics of the load generator (no network here; see load_client.cpp).
#include "cli/load_gen.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace tessera::cli {
namespace {

// Plain English words: every tokenizer splits them into few tokens.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "with", "as", "by", "at", "from", "his",
    "her", "time", "people", "year", "way", "day", "man", "thing", "woman", "life", "child", "world",
    "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place",
    "case", "week", "company", "system", "program", "question", "work", "government", "number", "night",
    "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right",
    "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head", "house", "service",
    "friend", "father", "power", "hour", "game", "line", "end", "member", "law", "car", "city", "name",
    "river", "music", "garden", "light", "stone", "window", "bread", "train", "letter", "cloud", "horse"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string random_words(std::mt19937_64& rng, int32_t count) {
  std::string out;
  for (int32_t i = 0; i < count; ++i) {
    if (i > 0) out += ' ';
    out += kWords[rng() % kNumWords];
  }
  return out;
}

nlohmann::json stats(std::vector<double> v) {
  const double mean = v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return nlohmann::json{{"mean", mean}, {"median", percentile(v, 50)}, {"p90", percentile(v, 90)},
                        {"p99", percentile(v, 99)}};
}

}  // namespace

namespace {

std::vector<BenchPrompt> make_multi_tenant_dataset(const LoadConfig& c) {
  std::mt19937_64 rng(c.seed);
  std::vector<std::string> systems;
  for (int32_t t = 0; t < std::max(1, c.num_system_prompts); ++t) {
    systems.push_back("You are assistant " + std::to_string(t) + ". " + random_words(rng, c.system_prompt_len));
  }
  std::vector<BenchPrompt> out;
  for (int32_t s = 0; s < c.num_sessions; ++s) {
    nlohmann::json messages = nlohmann::json::array();
    messages.push_back({{"role", "system"}, {"content", systems[static_cast<size_t>(s) % systems.size()]}});
    int32_t words = c.system_prompt_len;
    for (int32_t t = 0; t < c.num_turns; ++t) {
      if (t > 0) {  // the previous turn's (synthetic) reply
        messages.push_back({{"role", "assistant"}, {"content", random_words(rng, c.output_len)}});
        words += c.output_len;
      }
      messages.push_back({{"role", "user"}, {"content", random_words(rng, c.input_len)}});
      words += c.input_len;
      BenchPrompt p;
      p.messages = messages;
      p.num_words = words;
      p.max_tokens = c.output_len;
      p.session = s;
      p.turn = t;
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace

std::vector<BenchPrompt> make_dataset(const LoadConfig& c) {
  if (c.workload == "multi-tenant") return make_multi_tenant_dataset(c);
  std::mt19937_64 rng(c.seed);
  std::vector<std::string> prefixes;
  for (int32_t g = 0; g < std::max(1, c.num_prefix_groups); ++g) {
    prefixes.push_back(c.prefix_len > 0 ? random_words(rng, c.prefix_len) : std::string());
  }
  std::vector<BenchPrompt> out;
  const int32_t out_spread =
      static_cast<int32_t>(std::lround(c.output_len * std::clamp(c.output_len_range, 0.0, 1.0)));
  const int32_t spread = static_cast<int32_t>(std::lround(c.input_len * std::clamp(c.input_len_range, 0.0, 1.0)));
  for (int32_t i = 0; i < c.num_prompts; ++i) {
    int32_t len = c.input_len;
    if (spread > 0) len += static_cast<int32_t>(rng() % static_cast<uint64_t>(2 * spread + 1)) - spread;
    len = std::max(1, len);
    const std::string& prefix = prefixes[static_cast<size_t>(i) % prefixes.size()];
    BenchPrompt p;
    p.text = prefix.empty() ? random_words(rng, len) : prefix + " " + random_words(rng, len);
    p.num_words = len + (prefix.empty() ? 0 : c.prefix_len);
    p.max_tokens = c.output_len;
    if (out_spread > 0) {
      p.max_tokens += static_cast<int32_t>(rng() % static_cast<uint64_t>(2 * out_spread + 1)) - out_spread;
      p.max_tokens = std::max(1, p.max_tokens);
    }
    out.push_back(std::move(p));
  }
  return out;
}

uint64_t sweep_seed(uint64_t seed, size_t rate_index) {
  return seed + static_cast<uint64_t>(rate_index) * 0x9E3779B97F4A7C15ull;  // odd: distinct for every index
}

std::vector<double> arrival_offsets(int32_t num_requests, double rate, double burstiness, uint64_t seed) {
  std::vector<double> out(static_cast<size_t>(std::max(0, num_requests)), 0.0);
  if (!(rate > 0.0) || std::isinf(rate)) return out;
  // Gamma inter-arrivals with mean 1 / rate: shape = burstiness, scale = 1 / (rate * burstiness).
  std::mt19937_64 rng(seed ^ 0xA5A5A5A5ull);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) t += gap(rng);
    out[i] = t;
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double tpot_ms(const RequestRecord& r) {
  if (r.output_tokens <= 1) return 0.0;
  return (r.e2e_ms - r.ttft_ms) / static_cast<double>(r.output_tokens - 1);
}

nlohmann::json summarize(const std::vector<RequestRecord>& records, double duration_s, const LoadConfig& c) {
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t num_ok = 0, input_tokens = 0, output_tokens = 0, num_good = 0;
  nlohmann::json errors = nlohmann::json::object();
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      errors[r.error] = errors.value(r.error, 0) + 1;
      continue;
    }
    ++num_ok;
    input_tokens += r.prompt_tokens;
    output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    if (r.output_tokens > 1) tpot.push_back(tpot_ms(r));
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    bool good = true;
    for (const auto& [name, limit] : c.slo_ms) {
      const double value = name == "ttft" ? r.ttft_ms : name == "tpot" ? tpot_ms(r) : r.e2e_ms;
      good = good && value <= limit;
    }
    num_good += good ? 1 : 0;
  }
  const double d = duration_s > 0.0 ? duration_s : 1e-9;
  nlohmann::json out = {
      {"request_rate", std::isinf(c.request_rate) || c.request_rate <= 0.0 ? nlohmann::json("inf")
                                                                           : nlohmann::json(c.request_rate)},
      {"burstiness", c.burstiness},
      {"max_concurrency", c.max_concurrency},
      {"duration_s", duration_s},
      {"num_requests", records.size()},
      {"completed", num_ok},
      {"failed", static_cast<int64_t>(records.size()) - num_ok},
      {"errors", errors},
      {"total_input_tokens", input_tokens},
      {"total_output_tokens", output_tokens},
      {"request_throughput", static_cast<double>(num_ok) / d},
      {"output_throughput", static_cast<double>(output_tokens) / d},
      {"total_token_throughput", static_cast<double>(input_tokens + output_tokens) / d},
      {"ttft_ms", stats(ttft)},
      {"tpot_ms", stats(tpot)},
      {"itl_ms", stats(itl)},
      {"e2el_ms", stats(e2e)}};
  if (!c.slo_ms.empty()) {
    out["goodput"] = static_cast<double>(num_good) / d;
    out["goodput_requests"] = num_good;
    out["slo_ms"] = c.slo_ms;
  }
  return out;
}

}  // namespace tessera::cli
