// Statistics of speculative decoding through the whole public Engine (scheduler, paged KV with
// rejected slots given back, draft proposer, runner, RejectionSampler, metrics) on stories260K
// (F32 target, 512-token vocabulary):
//  1. Lossless sampling: at temperature 1 with a deliberately different draft (a Q4_0 copy of the
//     target made by `tessera quantize`, so q != p), the tokens at the first speculative positions
//     after a fixed prompt are distributed as without speculation, over thousands of seeds (a
//     chi-square homogeneity test with its bound derived below); the same test flags the engine
//     with a deliberately broken RejectionSampler (accept every draft), so it can fail.
//  2. Formula: with a synthetic proposer whose draft tokens are right independently with a known
//     probability a (a greedy self-draft whose tokens the test's config adjustment replaces with a wrong one
//     with probability 1 - a, k fixed), the measured per-position acceptance and the mean tokens
//     per target step agree with a and (1 - a^(k+1)) / (1 - a) within the noise stated there.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine_harness.h"
#include "sample/rejection_sampler.h"
#include "speculative/speculator.h"

namespace tessera {
namespace {

using testing::engine_config;

const std::string kStories = TESSERA_TESTDATA_DIR "/models/stories260K.gguf";

std::string quantized_stories(const std::string& type) {
  std::string out = ::testing::TempDir();
  out += "/stories260K.stats.";
  out += type;
  out += ".gguf";
  std::string cmd = TESSERA_BIN;
  cmd += " quantize ";
  cmd += kStories;
  cmd += " ";
  cmd += out;
  cmd += " ";
  cmd += type;
  cmd += " >/dev/null 2>&1";
  TESSERA_CHECK(std::system(cmd.c_str()) == 0, "{} failed", cmd);
  return out;
}

std::vector<int32_t> tokenize(const std::string& text) {
  auto engine = Engine::create(engine_config(kStories, "", "", 1));
  TESSERA_CHECK(engine.ok(), "engine");
  return (*engine)->tokenize(text, true, false);
}

// ---------------------------------------------------------------------------------------------
// 1. Losslessness.

constexpr int32_t kSpecK = 2;             // drafts of the first verification: output[1], output[2]
constexpr int32_t kSeeds = 3000;          // requests per arm
constexpr int64_t kMinPooledPerBin = 20;  // pooled count of a bin (~10 expected per arm)
// Chi-square bound. Each arm's requests use their own seeds (base: [0, N), speculative arms:
// [N, 2N)), so the two samples are independent. Conditional on the pooled counts of each bin the
// arm labels are hypergeometric under H0 (speculation lossless), so choosing bins from pooled
// counts keeps the 2 x B homogeneity statistic asymptotically chi-square with B - 1 degrees of
// freedom (>= ~10 expected per cell keeps the approximation good). The bound is its 1 - 1e-5
// quantile by Wilson-Hilferty, q = df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3 with z = 4.265: with the
// fixed seeds a correct engine passes deterministically, and a change that reshuffles the random
// streams would fail spuriously with probability 1e-5 per statistic (3 statistics).
constexpr double kZ = 4.265;

double chi_square_bound(int df) {
  const double a = 2.0 / (9.0 * df);
  const double c = 1.0 - a + kZ * std::sqrt(a);
  return df * c * c * c;
}

struct Homogeneity {
  double chi_square = 0.0;
  int df = 0;
  double bound = 0.0;
  double tv = 0.0;  // total variation between the two empirical distributions (for the log)
};

// Two-sample chi-square over categories (token id, or a pair of ids). Categories with a pooled
// count < kMinPooledPerBin are merged into one "other" bin, dropped if that too is below it.
Homogeneity homogeneity(const std::map<int64_t, std::array<int64_t, 2>>& counts) {
  std::vector<std::array<int64_t, 2>> bins;
  std::array<int64_t, 2> other{0, 0};
  for (const auto& [key, c] : counts) {
    if (c[0] + c[1] >= kMinPooledPerBin) {
      bins.push_back(c);
    } else {
      other[0] += c[0];
      other[1] += c[1];
    }
  }
  if (other[0] + other[1] >= kMinPooledPerBin) bins.push_back(other);
  double n[2] = {0, 0};
  for (const auto& b : bins) {
    n[0] += static_cast<double>(b[0]);
    n[1] += static_cast<double>(b[1]);
  }
  Homogeneity h;
  const double total = n[0] + n[1];
  for (const auto& b : bins) {
    const double pooled = static_cast<double>(b[0] + b[1]);
    for (int arm = 0; arm < 2; ++arm) {
      const double expected = n[arm] * pooled / total;
      h.chi_square += (static_cast<double>(b[arm]) - expected) * (static_cast<double>(b[arm]) - expected) / expected;
    }
    h.tv += 0.5 * std::abs(static_cast<double>(b[0]) / n[0] - static_cast<double>(b[1]) / n[1]);
  }
  h.df = static_cast<int>(bins.size()) - 1;
  h.bound = chi_square_bound(h.df);
  return h;
}

// kSeeds requests of one prompt at temperature 1, seeds first_seed.., each generating 2 + kSpecK
// tokens: output[0] comes from the prefill, then the first verification step checks kSpecK drafts
// (output[1..kSpecK]). At most 4 sequences run at once (max_num_seqs = 4 = the Speculator's
// max_batch_for_spec), so every decoding sequence speculates.
struct Sampled {
  std::vector<std::vector<int32_t>> outputs;  // [kSeeds][2 + kSpecK]
  MetricsSnapshot metrics;
};

Sampled sample_outputs(const EngineConfig& config, const std::vector<int32_t>& prompt, uint64_t first_seed,
                       const std::function<void(EngineConfigs&)>& adjust = nullptr) {
  auto engine = EngineImpl::create_impl(config, adjust);
  TESSERA_CHECK(engine.ok(), "engine: {}", engine.ok() ? "" : engine.error().message);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int32_t i = 0; i < kSeeds; ++i) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.max_tokens = 2 + kSpecK;
    p.ignore_eos = true;
    p.seed = first_seed + static_cast<uint64_t>(i);
    auto s = (*engine)->submit({prompt, p, ""});
    TESSERA_CHECK(s.ok(), "submit");
    streams.push_back(*s);
  }
  Sampled out;
  for (auto& s : streams) {
    std::vector<int32_t> ids;
    while (auto ev = s->next()) ids.insert(ids.end(), ev->token_ids.begin(), ev->token_ids.end());
    TESSERA_CHECK(ids.size() == static_cast<size_t>(2 + kSpecK), "got {} tokens", ids.size());
    out.outputs.push_back(std::move(ids));
  }
  for (int i = 0; i < 200; ++i) {  // the last step publishes its metrics just after its events
    out.metrics = (*engine)->metrics();
    if (out.metrics.num_requests_finished == kSeeds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (*engine)->shutdown(std::chrono::milliseconds(0));
  return out;
}

EngineConfig lossless_config(const std::string& speculative, const std::string& draft) {
  EngineConfig c = engine_config(kStories, speculative, draft, kSpecK);
  c.max_num_seqs = 4;
  return c;
}

// The three statistics: output[1] alone, output[2] alone, and the pair (output[0], output[1]).
struct Lossless {
  Homogeneity first, second, pair;
  bool within_bounds() const {
    return first.chi_square < first.bound && second.chi_square < second.bound && pair.chi_square < pair.bound;
  }
};

Lossless compare(const std::vector<std::vector<int32_t>>& base, const std::vector<std::vector<int32_t>>& spec) {
  std::map<int64_t, std::array<int64_t, 2>> first, second, pair;
  const std::vector<std::vector<int32_t>>* arms[2] = {&base, &spec};
  for (int arm = 0; arm < 2; ++arm) {
    for (const auto& ids : *arms[arm]) {
      first[ids[1]][arm] += 1;
      second[ids[2]][arm] += 1;
      pair[int64_t{ids[0]} * 65536 + ids[1]][arm] += 1;
    }
  }
  return {homogeneity(first), homogeneity(second), homogeneity(pair)};
}

void log(const char* name, const Lossless& l) {
  for (const auto& [what, h] : {std::pair{"output[1]", l.first}, {"output[2]", l.second}, {"(out0,out1)", l.pair}}) {
    std::printf("%-14s %-12s chi2 %8.1f  df %4d  bound %7.1f  TV %.3f\n", name, what, h.chi_square, h.df, h.bound,
                h.tv);
  }
}

// An engine whose rejection sampler is broken in the given way (RunnerConfig::rejection_fault).
std::function<void(EngineConfigs&)> broken_sampler(sample::RejectionFault fault) {
  return [fault](EngineConfigs& d) { d.runner.rejection_fault = fault; };
}

TEST(EngineLossless, Q4_0DraftAtTemperature1MatchesTargetAndBrokenSamplerIsCaught) {
  const std::string draft = quantized_stories("Q4_0");
  // A prefix with a wide next-token distribution (~40 bins per statistic): "Once upon a time..."
  // continuations are nearly deterministic in stories260K and would leave the test little to see.
  const auto prompt = tokenize("One day, a");
  const auto base = sample_outputs(lossless_config("", ""), prompt, 0).outputs;
  const auto spec_cfg = lossless_config("draft", draft);

  const Sampled spec = sample_outputs(spec_cfg, prompt, kSeeds);
  const Lossless ok = compare(base, spec.outputs);
  log("speculative", ok);
  EXPECT_TRUE(ok.within_bounds());
  EXPECT_GE(ok.first.df, 10);  // enough distinct outputs for the statistic to mean something
  // It really speculated on every request's first decode step, and p != q made it reject some.
  const MetricsSnapshot& m = spec.metrics;
  std::printf("drafts %lld, draft tokens %lld, accepted %lld\n", static_cast<long long>(m.spec_num_drafts),
              static_cast<long long>(m.spec_num_draft_tokens), static_cast<long long>(m.spec_num_accepted_tokens));
  EXPECT_GE(m.spec_num_drafts, kSeeds);
  EXPECT_LT(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);

  // Broken: every draft accepted, so output[1..k] follow the draft's q instead of p.
  const std::vector<std::vector<int32_t>> broken =
      sample_outputs(spec_cfg, prompt, kSeeds, broken_sampler(sample::RejectionFault::kAcceptAll)).outputs;
  const Lossless bad = compare(base, broken);
  log("accept-all", bad);
  // Measured: chi2 237 / 176 / 227 against bounds 86 / 98 / 85 (the correct engine: 36 / 38 / 36).
  EXPECT_FALSE(bad.within_bounds());
  EXPECT_GT(bad.first.chi_square, bad.first.bound);
  EXPECT_GT(bad.pair.chi_square, bad.pair.bound);
}

// ---------------------------------------------------------------------------------------------
// 2. Tokens per step against (1 - a^(k+1)) / (1 - a).

struct FormulaCase {
  int32_t k;
  double keep;  // probability a that a draft token is right
};

// Truncated geometric: A = accepted drafts, P(A >= i) = a^i for i <= k; T = A + 1 tokens per step.
double variance_tokens_per_step(double a, int32_t k) {
  double m1 = 0.0, m2 = 0.0;
  for (int32_t n = 0; n <= k; ++n) {
    const double prob = n < k ? std::pow(a, n) * (1.0 - a) : std::pow(a, k);
    m1 += prob * (n + 1);
    m2 += prob * (n + 1) * (n + 1);
  }
  return m2 - m1 * m1;
}

class FormulaAgreement : public ::testing::TestWithParam<FormulaCase> {};

TEST_P(FormulaAgreement, MeasuredTokensPerStepMatch) {
  const FormulaCase c = GetParam();
  // The synthetic proposer: no adaptive k, no back-off (every step proposes exactly k), each draft
  // token kept with probability c.keep.
  // With a greedy self-draft every untouched draft equals the target's argmax, so each draft
  // position is accepted independently with probability c.keep (expected_tokens_per_step's
  // i.i.d. setting): a replaced token, (token + 1) % vocab, is always rejected.
  auto rng = std::make_shared<sample::Rng>(77 + static_cast<uint64_t>(c.k));
  auto synthetic = [&c, rng](EngineConfigs& d) {
    d.spec.speculator.adaptive = false;
    const int32_t vocab = d.spec.vocab_size;
    d.spec.draft_filter = [keep = c.keep, rng, vocab](int64_t, std::span<int32_t> drafts) {
      for (int32_t& t : drafts) {
        if (rng->uniform() >= keep) t = (t + 1) % vocab;
      }
    };
  };
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : {"Once upon a time", "Lily and Ben went to the park.", "The cat sat on the mat. The cat",
                        "Tom had a red ball"}) {
    prompts.push_back(tokenize(t));
  }
  SamplingParams p;
  p.temperature = 0.0f;  // greedy self-draft: an untouched draft token is always accepted
  p.max_tokens = 400;
  p.ignore_eos = true;
  const auto r = testing::run_engine(engine_config(kStories, "draft", kStories, c.k), prompts, p, synthetic);
  for (const auto& t : r.tokens) ASSERT_EQ(t.size(), 400u);
  const MetricsSnapshot& m = r.metrics;
  ASSERT_EQ(m.spec_accepted_per_position.size(), static_cast<size_t>(c.k));

  const auto steps = static_cast<double>(m.spec_num_drafts);
  // Steps whose k was clipped by max_tokens (the last of each request) have fewer drafts; the
  // deficit bounds their number. They bias the mean down by at most (E[T] - 1) each.
  const int64_t deficit = m.spec_num_drafts * c.k - m.spec_num_draft_tokens;
  ASSERT_GE(deficit, 0);
  // alpha from the per-position counters: accepted[i] / reached[i], reached[0] = steps and
  // reached[i] = accepted[i - 1] (a draft position is tested only if all before it were accepted).
  double accepted = 0.0, tested = steps;
  for (int32_t i = 0; i < c.k; ++i) {
    accepted += static_cast<double>(m.spec_accepted_per_position[static_cast<size_t>(i)]);
    if (i + 1 < c.k) tested += static_cast<double>(m.spec_accepted_per_position[static_cast<size_t>(i)]);
  }
  const double alpha = accepted / tested;
  const double mean = static_cast<double>(m.spec_num_accepted_tokens + m.spec_num_drafts) / steps;
  const double expected = sample::expected_tokens_per_step(c.keep, c.k);

  // Noise (4.5 standard errors, so a correct engine fails with probability < 1e-5 per check):
  //  alpha: Bernoulli(a) per tested position, sd = sqrt(a (1 - a) / tested); plus the clipped
  //         steps' share (each moves `tested` by at most k).
  //  mean:  sd = sqrt(Var[T] / steps), Var[T] of the truncated geometric; plus the clipping bias.
  //  formula(alpha_measured) vs mean: both move with the same draws; bounded by the sum of the
  //         mean's noise and the formula's slope times alpha's noise (conservative).
  const double sd_alpha = std::sqrt(c.keep * (1.0 - c.keep) / tested);
  const double clip_alpha = static_cast<double>(deficit) / tested;
  const double sd_mean = std::sqrt(variance_tokens_per_step(c.keep, c.k) / steps);
  const double clip_mean = static_cast<double>(deficit) * (expected - 1.0) / steps;
  const double slope = (sample::expected_tokens_per_step(c.keep + 1e-4, c.k) -
                        sample::expected_tokens_per_step(c.keep - 1e-4, c.k)) / 2e-4;
  std::printf("k=%d a=%.2f: steps %.0f tested %.0f alpha %.4f (sd %.4f) tokens/step %.4f formula(a) %.4f "
              "formula(alpha) %.4f (sd %.4f)\n",
              c.k, c.keep, steps, tested, alpha, sd_alpha, mean, expected, sample::expected_tokens_per_step(alpha, c.k),
              sd_mean);
  EXPECT_GT(steps, 300);
  EXPECT_NEAR(alpha, c.keep, 4.5 * sd_alpha + clip_alpha);
  EXPECT_NEAR(mean, expected, 4.5 * sd_mean + clip_mean);
  EXPECT_NEAR(mean, sample::expected_tokens_per_step(alpha, c.k),
              4.5 * (sd_mean + slope * sd_alpha) + clip_mean + slope * clip_alpha);
  // i.i.d. acceptance shows in every position: accepted[i] / steps ~ a^(i+1) (binomial sd).
  for (int32_t i = 0; i < c.k; ++i) {
    const double want = std::pow(c.keep, i + 1);
    const double got = static_cast<double>(m.spec_accepted_per_position[static_cast<size_t>(i)]) / steps;
    EXPECT_NEAR(got, want, 4.5 * std::sqrt(want * (1.0 - want) / steps) + clip_alpha) << "position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stories, FormulaAgreement,
                         ::testing::Values(FormulaCase{2, 0.6}, FormulaCase{4, 0.8}, FormulaCase{8, 0.7}),
                         [](const auto& info) {
                           std::string name = "k";
                           name += std::to_string(info.param.k);
                           name += "_a";
                           name += std::to_string(static_cast<int>(info.param.keep * 100 + 0.5));
                           return name;
                         });

}  // namespace
}  // namespace tessera
