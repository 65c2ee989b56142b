#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <chrono>

#include "grammar/stack_automaton.h"

namespace tessera::grammar {
namespace {

enum class TokenClass : uint8_t { kRejected, kAccepted, kUncertain };

// Walks every token from position `pos` in sorted order, one state per prefix depth, skipping a
// whole subtree when its prefix dies. `cls` is [vocab] scratch (only sorted ids are written).
PositionTokens classify_position(StackAutomaton& automaton, const TokenTable& tokens, int32_t start_node,
                                 std::vector<TokenClass>& cls) {
  const auto sorted = tokens.sorted();
  const auto lcp_prev = tokens.lcp_prev();
  const auto n = static_cast<int32_t>(sorted.size());
  std::vector<int32_t> states{automaton.node_state(start_node)};
  std::vector<uint8_t> exited{0};  // exited[d]: the frame could be left before byte d
  PositionTokens out;
  int32_t num_accepted = 0;
  int32_t valid = 0;  // states[0..valid] hold the previous token's path
  for (int32_t rank = 0; rank < n;) {
    const std::string_view bytes = tokens.bytes(sorted[rank]);
    const auto len = static_cast<int32_t>(bytes.size());
    if (static_cast<int32_t>(states.size()) <= len) {
      states.resize(len + 1);
      exited.resize(len + 1);
    }
    int32_t d = std::min(rank == 0 ? 0 : lcp_prev[rank], valid);
    while (d < len && !automaton.is_dead(states[d])) {
      exited[d + 1] = exited[d] || automaton.can_end(states[d]);
      states[d + 1] = automaton.step(states[d], static_cast<uint8_t>(bytes[d]));
      ++d;
    }
    valid = d;
    if (d == len && !automaton.is_dead(states[d])) {
      cls[sorted[rank]] = TokenClass::kAccepted;
      ++num_accepted;
      ++rank;
      continue;
    }
    // The prefix bytes[0, d) died: every token under it shares the verdict.
    const TokenClass verdict = exited[d] ? TokenClass::kUncertain : TokenClass::kRejected;
    const int32_t end = tokens.subtree_end(rank, d);
    for (; rank < end; ++rank) {
      cls[sorted[rank]] = verdict;
      if (verdict == TokenClass::kUncertain) out.uncertain.push_back(rank);
    }
  }
  const int32_t num_rejected = n - num_accepted - static_cast<int32_t>(out.uncertain.size());
  out.stores_rejected = num_rejected < num_accepted;
  const TokenClass listed = out.stores_rejected ? TokenClass::kRejected : TokenClass::kAccepted;
  for (int32_t id = 0; id < tokens.vocab_size(); ++id) {
    if (mask_test(tokens.normal_mask(), id) && cls[id] == listed) out.ids.push_back(id);
  }
  std::sort(out.uncertain.begin(), out.uncertain.end());
  return out;
}

// The frames known to lie under any frame of a rule: a rule called from exactly one place (tail
// calls of itself aside) always returns there, and so on up while the caller is unique as well.
// Classifying a position over {position, known frames} instead of {position, bottom} lets
// tokens that run past the rule's end (`abc",` in a JSON string) be decided at compile time;
// only leaving the known frames stays context-dependent. Sound because every run-time stack
// with a top at that position has these frames under it.
class KnownParents {
 public:
  KnownParents(const Grammar& g, StackAutomaton& automaton) : g_(g), automaton_(automaton) {
    const auto num_rules = static_cast<size_t>(g.num_rules());
    rule_of_.assign(static_cast<size_t>(g.num_positions()), -1);
    site_.assign(num_rules, kNoSite);
    parent_.assign(num_rules, kUnknown);
    for (int32_t r = 0; r < g.num_rules(); ++r) {
      for (int32_t start : g.rule_alts[r]) {
        for (int32_t p = start;; ++p) {
          rule_of_[p] = r;
          if (g.elements[p].kind == Element::kEnd) break;
        }
      }
    }
    site_[g.root] = kManySites;  // entered at the start too
    for (int32_t p = 0; p < g.num_positions(); ++p) {
      const Element& el = g.elements[p];
      if (el.kind != Element::kRule) continue;
      const bool self_tail = el.index == rule_of_[p] && g.elements[p + 1].kind == Element::kEnd;
      if (self_tail) continue;
      int32_t& site = site_[el.index];
      site = site == kNoSite ? p : kManySites;
    }
  }

  int32_t rule_of(int32_t pos) const { return rule_of_[pos]; }

  // The node a frame of `rule` returns to (StackAutomaton::kBottom when unknown).
  int32_t parent_of(int32_t rule, int depth = 0) {
    if (parent_[rule] != kUnknown) return parent_[rule];
    const int32_t site = site_[rule];
    int32_t parent = StackAutomaton::kBottom;
    if (site >= 0 && depth < 64) {
      const int32_t caller_parent = parent_of(rule_of_[site], depth + 1);
      parent = g_.elements[site + 1].kind == Element::kEnd ? caller_parent
                                                            : automaton_.node(site + 1, caller_parent);
    }
    parent_[rule] = parent;
    return parent;
  }

 private:
  static constexpr int32_t kNoSite = -1, kManySites = -2, kUnknown = -1;
  const Grammar& g_;
  StackAutomaton& automaton_;
  std::vector<int32_t> rule_of_, site_, parent_;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(
    std::string_view text, std::shared_ptr<const TokenTable> tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_grammar(text);
  if (!parsed.ok()) return parsed.error();
  auto out = std::make_shared<CompiledGrammar>();
  out->grammar = std::make_shared<const Grammar>(std::move(parsed).value());
  out->tokens = std::move(tokens);
  const Grammar& g = *out->grammar;
  out->positions.resize(static_cast<size_t>(g.num_positions()));
  StackAutomaton automaton(out->grammar);
  std::vector<TokenClass> cls(static_cast<size_t>(out->tokens->vocab_size()),
                              TokenClass::kRejected);
  KnownParents known(g, automaton);
  for (int32_t p = 0; p < g.num_positions(); ++p) {
    if (g.elements[p].kind != Element::kBytes) continue;
    const int32_t start = automaton.node(p, known.parent_of(known.rule_of(p)));
    out->positions[p] = classify_position(automaton, *out->tokens, start, cls);
    out->num_uncertain += out->positions[p].uncertain.size();
    if (automaton.overflowed()) {
      return Error{ErrorCode::kInvalidArgument,
                   "grammar: too ambiguous to compile (automaton size limit reached)"};
    }
  }
  out->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenTable> tokens, size_t capacity)
    : tokens_(std::move(tokens)), capacity_(capacity) {}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(text);
    if (it != entries_.end()) {
      ++hits_;
      it->second.last_use = ++clock_;
      return it->second.grammar;
    }
    ++misses_;
  }
  auto compiled = compile_grammar(text, tokens_);  // outside the lock: compiles may be slow
  if (!compiled.ok()) return compiled.error();
  std::lock_guard<std::mutex> lock(mu_);
  entries_[text] = {compiled.value(), ++clock_};
  while (entries_.size() > capacity_) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    }
    entries_.erase(oldest);
  }
  return compiled;
}

size_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
size_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace tessera::grammar
