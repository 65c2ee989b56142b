// N-gram (prompt lookup) proposer: see ngram_proposer.h.
#include "speculative/ngram_proposer.h"

#include <algorithm>
#include <chrono>

#include "util/check.h"

namespace tessera::speculative {

Status validate_ngram_config(const NgramConfig& c) {
  if (c.min_n < 1 || c.max_n < c.min_n) {
    return make_error(ErrorCode::kInvalidArgument,
                      "n-gram sizes need 1 <= min_n <= max_n, got min_n={} max_n={}", c.min_n,
                      c.max_n);
  }
  if (c.num_speculative_tokens < 1) {
    return make_error(ErrorCode::kInvalidArgument, "num_speculative_tokens must be >= 1, got {}",
                      c.num_speculative_tokens);
  }
  return ok_status();
}

NgramProposer::NgramProposer(const NgramConfig& config) : config_(config) {
  const Status s = validate_ngram_config(config);
  TESSERA_CHECK(s.ok(), "bad NgramConfig: {}", s.ok() ? "" : s.error().message);
}

int32_t NgramProposer::propose(std::span<const int32_t> tokens, std::span<int32_t> out) const {
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  const int64_t k = std::min<int64_t>(config_.num_speculative_tokens,
                                      static_cast<int64_t>(out.size()));
  if (k <= 0) return 0;
  const int32_t* t = tokens.data();
  for (int64_t n = std::min<int64_t>(config_.max_n, num_tokens - 1); n >= config_.min_n; --n) {
    const int32_t* suffix = t + num_tokens - n;
    // Candidate starts s in [0, num_tokens - n - 1]: the window t[s, s + n) must be followed by
    // at least one token inside the sequence.
    const int64_t last_start = num_tokens - n - 1;
    int64_t found = -1;
    auto matches = [&](int64_t s) {
      if (t[s + n - 1] != suffix[n - 1]) return false;  // last token first: the cheapest reject
      for (int64_t j = 0; j < n - 1; ++j) {
        if (t[s + j] != suffix[j]) return false;
      }
      return true;
    };
    if (config_.policy == MatchPolicy::kLatest) {
      for (int64_t s = last_start; s >= 0 && found < 0; --s) {
        if (matches(s)) found = s;
      }
    } else {
      for (int64_t s = 0; s <= last_start && found < 0; ++s) {
        if (matches(s)) found = s;
      }
    }
    if (found >= 0) {
      const int64_t begin = found + n;
      const int64_t count = std::min(k, num_tokens - begin);
      std::copy(t + begin, t + begin + count, out.begin());
      return static_cast<int32_t>(count);
    }
  }
  return 0;
}

std::vector<int32_t> NgramProposer::propose(std::span<const int32_t> tokens) const {
  std::vector<int32_t> out(config_.num_speculative_tokens);
  out.resize(propose(tokens, out));
  return out;
}

std::vector<int32_t> propose_ngram_ref(const NgramConfig& config,
                                       std::span<const int32_t> tokens) {
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  for (int64_t n = config.max_n; n >= config.min_n; --n) {
    if (n >= num_tokens) continue;  // need the suffix plus at least one earlier token
    const auto suffix = tokens.last(n);
    std::vector<int64_t> starts;  // every earlier window equal to the suffix
    for (int64_t s = 0; s + n < num_tokens; ++s) {
      if (std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) starts.push_back(s);
    }
    if (starts.empty()) continue;
    const int64_t s = config.policy == MatchPolicy::kLatest ? starts.back() : starts.front();
    const int64_t begin = s + n;
    const int64_t end = std::min<int64_t>(begin + config.num_speculative_tokens, num_tokens);
    return std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end);
  }
  return {};
}

void NgramProposer::propose_batch(std::span<const DraftRequest> requests, ThreadPool& /*pool*/,
                                  std::span<DraftResult> results) {
  const auto start = std::chrono::steady_clock::now();
  int32_t max_k = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    max_k = std::max(max_k, r.num_drafts);
    context_.assign(r.prompt.begin(), r.prompt.end());
    context_.insert(context_.end(), r.output.begin(), r.output.end());
    std::vector<int32_t>& drafts = results[i].tokens;
    drafts.resize(static_cast<size_t>(std::max(0, r.num_drafts)));
    drafts.resize(static_cast<size_t>(propose(context_, drafts)));
    results[i].probs.clear();
  }
  last_cost_ = ProposeCost{};
  last_cost_.num_forwards = max_k;
  last_cost_.forward_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tessera::speculative
