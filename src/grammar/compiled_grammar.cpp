#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <iterator>

#include "grammar/call_sites.h"
#include "grammar/stack_automaton.h"

namespace tessera::grammar {
namespace {

// The frames known to lie under any frame of a rule: a rule called from exactly one place (tail
// calls of itself aside) always returns there, and so on up while the caller is unique as well.
// Classifying a position over {position, known frames} instead of {position, bottom} lets
// tokens that run past the rule's end (`abc",` in a JSON string) be decided at compile time;
// only leaving the known frames stays context-dependent, and not even that when the chain ends
// at the root entered only at the start (leaving it is the end of the output). Sound because
// every run-time stack with a top at that position has these frames under it.
class KnownParents {
 public:
  KnownParents(const Grammar& g, StackAutomaton& automaton) : g_(g), automaton_(automaton) {
    const auto num_rules = static_cast<size_t>(g.num_rules());
    rule_of_.assign(static_cast<size_t>(g.num_positions()), -1);
    site_.assign(num_rules, kNoSite);
    parent_.assign(num_rules, kUnknown);
    complete_.assign(num_rules, 0);
    for (int32_t r = 0; r < g.num_rules(); ++r) {
      for (int32_t start : g.rule_alts[r]) {
        for (int32_t p = start;; ++p) {
          rule_of_[p] = r;
          if (g.elements[p].kind == Element::kEnd) break;
        }
      }
    }
    for (int32_t p = 0; p < g.num_positions(); ++p) {
      const Element& el = g.elements[p];
      if (el.kind != Element::kRule) continue;
      const bool self_tail = el.index == rule_of_[p] && g.elements[p + 1].kind == Element::kEnd;
      if (self_tail) continue;
      int32_t& site = site_[el.index];
      site = site == kNoSite ? p : kManySites;
    }
    // The root is entered at the start: with no other caller, its parent is the true end.
    site_[g.root] = site_[g.root] == kNoSite ? kStart : kManySites;
  }

  int32_t rule_of(int32_t pos) const { return rule_of_[pos]; }

  // The node a frame of `rule` returns to (StackAutomaton::kBottom when unknown or the end).
  int32_t parent_of(int32_t rule, int depth = 0) {
    if (parent_[rule] != kUnknown) return parent_[rule];
    const int32_t site = site_[rule];
    int32_t parent = StackAutomaton::kBottom;
    complete_[rule] = site == kStart;
    if (site >= 0 && depth < 256) {
      const int32_t caller = rule_of_[site];
      const int32_t caller_parent = parent_of(caller, depth + 1);
      complete_[rule] = complete_[caller];
      parent = g_.elements[site + 1].kind == Element::kEnd ? caller_parent
                                                            : automaton_.node(site + 1, caller_parent);
    }
    parent_[rule] = parent;
    return parent;
  }
  // Whether parent_of(rule)'s chain reaches the true end (call parent_of first).
  bool ends_at_root(int32_t rule) const { return complete_[rule] != 0; }

 private:
  static constexpr int32_t kNoSite = -1, kManySites = -2, kStart = -3, kUnknown = -1;
  const Grammar& g_;
  StackAutomaton& automaton_;
  std::vector<int32_t> rule_of_, site_, parent_;
  std::vector<uint8_t> complete_;
};

struct Frame {
  int32_t node;
  bool is_end;
};
Frame frame_of(int32_t pos, KnownParents& known, StackAutomaton& automaton) {
  const int32_t rule = known.rule_of(pos);
  const int32_t parent = known.parent_of(rule);
  return {automaton.node(pos, parent), known.ends_at_root(rule)};
}

// Tighter pairs with a slack (call_sites.h): tokens of at most `short_bytes` = slack + 1 bytes
// have the same class at a position as at its tighter one, so only the longer candidates are
// walked, and the tighter position's short uncertain tokens are this one's too.
int32_t short_bytes_of(const TighterPairs& pairs, int32_t p, bool use_tighter) {
  return use_tighter && pairs.slack[p] >= 0 ? pairs.slack[p] + 1 : 0;
}
// The ranks of tokens longer than a threshold, as bits, moved from the previous threshold
// (a chain's links ask for 1, 2, 3, ... in turn: each step sets or clears one length class).
class LongerTokens {
 public:
  explicit LongerTokens(const TokenTable& table)
      : order_(table.ranks_longer_than(0)), bits_(mask_words(table.num_sorted()), 0) {}
  const std::vector<uint64_t>& bits(const TokenTable& table, int32_t bytes) {
    const size_t count = table.ranks_longer_than(bytes).size();  // a prefix of order_
    for (; count_ < count; ++count_) mask_set(bits_, order_[count_]);
    for (; count_ > count; --count_) mask_clear(bits_, order_[count_ - 1]);
    return bits_;
  }

 private:
  std::span<const int32_t> order_;  // every rank, longest first
  std::vector<uint64_t> bits_;      // order_[0, count_)
  size_t count_ = 0;
};
void keep_longer(std::vector<uint64_t>& candidates, const std::vector<uint64_t>& longer) {
  for (size_t w = 0; w < candidates.size(); ++w) candidates[w] &= longer[w];
}
void add_short_uncertain(std::vector<int32_t>& uncertain, const std::vector<int32_t>& tighter,
                         const TokenTable& table, int32_t short_bytes) {
  std::vector<int32_t> merged;
  merged.reserve(uncertain.size() + tighter.size());
  auto walked = uncertain.begin();  // the longer ones: disjoint from the short ones
  for (int32_t r : tighter) {
    if (static_cast<int64_t>(table.sorted_bytes(r).size()) > short_bytes) continue;
    while (walked != uncertain.end() && *walked < r) merged.push_back(*walked++);
    merged.push_back(r);
  }
  merged.insert(merged.end(), walked, uncertain.end());
  uncertain = std::move(merged);
}

// Accepted ranks as bits, shared between positions until one of them adds to its set: a copy of
// x{m,n} whose walk accepted nothing new (most of a JSON string character's positions) then
// costs a pointer, not a [num_sorted / 64]-word copy (152k tokens: 19 KB a position).
using RankBits = std::shared_ptr<std::vector<uint64_t>>;
std::vector<uint64_t>& writable(RankBits& bits) {
  if (bits.use_count() > 1) bits = std::make_shared<std::vector<uint64_t>>(*bits);
  return *bits;
}
void add_ranks(RankBits& bits, const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return;
  std::vector<uint64_t>& b = writable(bits);
  for (int32_t r : ranks) mask_set(b, r);
}

// Links of an x{m,n} chain classified by one walk (compile_grammar): a token's bytes are read
// once for all of them; each adds a state per byte to step.
constexpr size_t kChainGroup = 8;

Error too_ambiguous() {
  return Error{ErrorCode::kInvalidArgument,
               "grammar: too ambiguous to compile (automaton size limit reached)"};
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(
    std::string_view text, std::shared_ptr<const TokenTable> tokens, CompileOptions options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_grammar(text);
  if (!parsed.ok()) return parsed.error();
  auto out = std::make_shared<CompiledGrammar>();
  out->source = std::make_shared<const Grammar>(std::move(parsed).value());
  ExpandedGrammar expanded = expand_call_sites(*out->source, kMaxExpandedPositions);
  out->grammar = std::make_shared<const Grammar>(std::move(expanded.grammar));
  out->tokens = std::move(tokens);
  const TokenTable& table = *out->tokens;
  const Grammar& src = *out->source;
  const Grammar& g = *out->grammar;
  const auto sorted = table.sorted();
  const auto normal = table.normal_mask();
  std::vector<uint64_t> bits(mask_words(table.vocab_size()));
  auto ranks_to_bits = [&](const std::vector<int32_t>& ranks) {
    for (int32_t r : ranks) mask_set(bits, sorted[r]);
  };
  std::vector<uint64_t> id_bits(bits.size());  // all zero between calls
  auto ids_of = [&](const std::vector<int32_t>& ranks) {
    std::vector<int32_t> ids;
    ids.reserve(ranks.size());
    if (ranks.size() < 512) {
      for (int32_t r : ranks) ids.push_back(sorted[r]);
      std::sort(ids.begin(), ids.end());
      return ids;
    }
    for (int32_t r : ranks) mask_set(id_bits, sorted[r]);  // a long list sorts by a bitset
    for (size_t w = 0; w < id_bits.size(); ++w) {
      for (; id_bits[w]; id_bits[w] &= id_bits[w] - 1) {
        ids.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(id_bits[w]))));
      }
    }
    return ids;
  };

  // Which positions are tighter ones (call_sites.h), in each grammar; level 1 keeps the full
  // accepted ranks of those and of the origins of level 2's.
  StackAutomaton src_automaton(out->source);
  KnownParents src_known(src, src_automaton);
  std::vector<int32_t> identity(static_cast<size_t>(src.num_rules()));
  for (int32_t r = 0; r < src.num_rules(); ++r) identity[r] = r;
  const TighterPairs src_pairs = tighter_positions(src, identity);
  const std::vector<int32_t>& src_tighter = src_pairs.tighter;
  std::vector<uint8_t> keep1(static_cast<size_t>(src.num_positions()), 0);
  std::vector<uint8_t> keep2(static_cast<size_t>(g.num_positions()), 0);
  for (int32_t t : src_tighter) {
    if (t >= 0) keep1[t] = 1;
  }
  for (int32_t t : expanded.pairs.tighter) {
    if (t >= 0) keep2[t] = 1, keep1[expanded.origin[t]] = 1;
  }

  // Level 1: every token from each source position's frame, less those its tighter position
  // (compiled first: tighter > p) accepted; the tighter set is contained in this one's.
  LongerTokens longer(table);
  std::vector<std::vector<int32_t>> uncertain1(static_cast<size_t>(src.num_positions()));
  std::vector<std::shared_ptr<const TokenSet>> level1_sets(uncertain1.size());
  std::vector<RankBits> acc1(uncertain1.size());  // rank bits, where kept
  for (int32_t p = src.num_positions() - 1; p >= 0; --p) {
    if (src.elements[p].kind != Element::kBytes) continue;
    const int32_t t = src_tighter[p];
    const bool use_tighter = t > p && acc1[t] != nullptr;
    const int32_t short_bytes = short_bytes_of(src_pairs, p, use_tighter);
    std::vector<uint64_t> candidates;
    if (use_tighter) {
      candidates = all_ranks(table);
      for (size_t w = 0; w < candidates.size(); ++w) candidates[w] &= ~(*acc1[t])[w];
      if (short_bytes > 0) keep_longer(candidates, longer.bits(table, short_bytes));
    }
    const Frame f = frame_of(p, src_known, src_automaton);
    TokenSplit split = classify_tokens(src_automaton, table, f.node, f.is_end,
                                       use_tighter ? &candidates : nullptr);
    if (src_automaton.overflowed()) return too_ambiguous();
    if (use_tighter) {  // split.accepted is disjoint from the tighter set
      level1_sets[p] = std::make_shared<const TokenSet>(level1_sets[t]->plus(ids_of(split.accepted), table));
    } else {
      std::fill(bits.begin(), bits.end(), 0);
      ranks_to_bits(split.accepted);
      level1_sets[p] = std::make_shared<const TokenSet>(bits, split.accepted.size(), table);
    }
    if (keep1[p]) {
      acc1[p] = use_tighter ? acc1[t] : std::make_shared<std::vector<uint64_t>>(mask_words(table.num_sorted()), 0);
      add_ranks(acc1[p], split.accepted);
    }
    if (short_bytes > 0) add_short_uncertain(split.uncertain, uncertain1[t], table, short_bytes);
    uncertain1[p] = std::move(split.uncertain);
  }

  out->level1_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Level 2: each copy re-walks the source position's uncertain tokens from its own frame,
  // less those its tighter position (one link deeper in x{m,n}, compiled first) accepted.
  out->positions.resize(static_cast<size_t>(g.num_positions()));
  StackAutomaton automaton(out->grammar);
  KnownParents known(g, automaton);
  std::vector<RankBits> acc2(static_cast<size_t>(g.num_positions()));
  // Level 1's uncertain ranks as bits, per origin while copies of it remain to be compiled.
  std::vector<std::vector<uint64_t>> uncertain1_bits(uncertain1.size());
  std::vector<int32_t> copies_left(uncertain1.size(), 0);
  for (int32_t p = 0; p < g.num_positions(); ++p) {
    if (g.elements[p].kind == Element::kBytes) ++copies_left[expanded.origin[p]];
  }
  std::vector<uint64_t> more(bits.size());
  // Links of one x{m,n} chain walked together (accepted_from_frames): looser[t] is the position
  // whose tighter one is t; prewalked[q] the accepted ranks a walk from a deeper link of q's
  // chain found for q (ascending; q's split, as its own walk would give it).
  std::vector<int32_t> looser(static_cast<size_t>(g.num_positions()), -1);
  for (int32_t q = 0; q < g.num_positions(); ++q) {
    if (expanded.pairs.tighter[q] >= 0) looser[expanded.pairs.tighter[q]] = q;
  }
  std::vector<std::vector<int32_t>> prewalked(static_cast<size_t>(g.num_positions()));
  std::vector<uint8_t> is_prewalked(static_cast<size_t>(g.num_positions()), 0);
  // Up to kChainGroup frames of p's chain, from p outwards, that one walk over p's candidates
  // classifies exactly: the same origin, frames that end at the root (accepted or rejected
  // only), slacks one apart (so each looser link's own candidates, the tokens its tighter link
  // left that are longer than its slack + 1, lie within p's; the shorter ones keep their class
  // along the chain). p itself needs a tighter link of its chain (its candidates exclude
  // what that one accepted).
  auto chain_links = [&](int32_t p, Frame f, bool chained) {
    std::vector<int32_t> links;
    if (!options.walk_chain_links_together || !chained || !f.is_end || expanded.pairs.slack[p] < 0) return links;
    links.push_back(f.node);
    for (int32_t q = looser[p], last = p; q >= 0 && links.size() < kChainGroup; last = q, q = looser[q]) {
      if (expanded.origin[q] != expanded.origin[p] || expanded.pairs.slack[q] != expanded.pairs.slack[last] + 1) break;
      const Frame fq = frame_of(q, known, automaton);
      if (!fq.is_end) break;
      links.push_back(fq.node);
    }
    return links;
  };
  // One walk for links[0] (p's frame) and the looser ones: p's accepted ranks are returned, the
  // others' new ones (not accepted one link deeper) kept for when the loop reaches them.
  auto walk_chain_links = [&](int32_t p, const std::vector<int32_t>& links, const std::vector<uint64_t>& candidates) {
    std::vector<std::vector<int32_t>> accepted = accepted_from_frames(automaton, table, links, candidates);
    out->num_chain_walked += links.size();
    for (size_t i = 1, q = static_cast<size_t>(p); i < links.size(); ++i) {
      q = static_cast<size_t>(looser[q]);
      std::vector<int32_t> fresh;
      std::set_difference(accepted[i].begin(), accepted[i].end(), accepted[i - 1].begin(),
                          accepted[i - 1].end(), std::back_inserter(fresh));
      prewalked[q] = std::move(fresh);
      is_prewalked[q] = 1;
    }
    return std::move(accepted[0]);
  };
  for (int32_t p = g.num_positions() - 1; p >= 0; --p) {
    if (g.elements[p].kind != Element::kBytes) continue;
    const int32_t o = expanded.origin[p];
    PositionTokens& pt = out->positions[p];
    pt.accepted = level1_sets[o];
    if (uncertain1[o].empty()) {
      if (keep2[p]) acc2[p] = acc1[o];
      continue;
    }
    const int32_t t = expanded.pairs.tighter[p];
    const bool use_tighter = t > p && acc2[t] != nullptr;
    const int32_t short_bytes = short_bytes_of(expanded.pairs, p, use_tighter);
    const Frame f = frame_of(p, known, automaton);
    TokenSplit split;
    if (is_prewalked[p]) {
      split.accepted = std::move(prewalked[p]);
      if (--copies_left[o] == 0) std::vector<uint64_t>().swap(uncertain1_bits[o]);
    } else if (uncertain1[o].size() < 2 * bits.size()) {  // few: filter the list, skip the bitsets
      std::vector<int32_t> list;
      for (int32_t r : uncertain1[o]) {
        if (use_tighter && mask_test(*acc2[t], r)) continue;
        if (static_cast<int64_t>(table.sorted_bytes(r).size()) <= short_bytes) continue;
        list.push_back(r);
      }
      split = classify_tokens(automaton, table, f.node, f.is_end, std::span<const int32_t>(list));
    } else {
      if (uncertain1_bits[o].empty()) uncertain1_bits[o] = rank_bits(table, uncertain1[o]);
      std::vector<uint64_t> candidates = uncertain1_bits[o];
      if (--copies_left[o] == 0) std::vector<uint64_t>().swap(uncertain1_bits[o]);
      if (use_tighter) {
        for (size_t w = 0; w < candidates.size(); ++w) candidates[w] &= ~(*acc2[t])[w];
        if (short_bytes > 0) keep_longer(candidates, longer.bits(table, short_bytes));
      }
      const std::vector<int32_t> links = chain_links(p, f, use_tighter && expanded.origin[t] == o);
      if (links.size() > 1) {
        split.accepted = walk_chain_links(p, links, candidates);
      } else {
        split = classify_tokens(automaton, table, f.node, f.is_end, &candidates);
      }
    }
    if (automaton.overflowed()) return too_ambiguous();
    out->num_rewalked += split.accepted.size() + split.uncertain.size();
    if (short_bytes > 0) add_short_uncertain(split.uncertain, out->positions[t].uncertain, table, short_bytes);
    // accepted = level 1's, the tighter position's (same origin: contains level 1's), new ones
    const bool same_origin = use_tighter && expanded.origin[t] == o;
    if (same_origin && split.accepted.empty()) {
      pt.accepted = out->positions[t].accepted;
    } else if (same_origin) {
      pt.accepted = std::make_shared<const TokenSet>(out->positions[t].accepted->plus(ids_of(split.accepted), table));
    } else if (use_tighter || !split.accepted.empty()) {
      if (use_tighter) out->positions[t].accepted->to_bits(bits, normal);
      if (use_tighter && expanded.origin[t] != o) {
        level1_sets[o]->to_bits(more, normal);
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= more[w];
      } else if (!use_tighter) {
        level1_sets[o]->to_bits(bits, normal);
      }
      ranks_to_bits(split.accepted);
      pt.accepted = std::make_shared<const TokenSet>(bits, count_bits(bits), table);
    }
    if (keep2[p] && same_origin) {
      acc2[p] = std::move(acc2[t]);
      add_ranks(acc2[p], split.accepted);
    } else if (keep2[p]) {
      acc2[p] = acc1[o];
      if (use_tighter) {
        std::vector<uint64_t>& b = writable(acc2[p]);
        for (size_t w = 0; w < b.size(); ++w) b[w] |= (*acc2[t])[w];
      }
      add_ranks(acc2[p], split.accepted);
    }
    if (use_tighter) acc2[t].reset();
    pt.uncertain = std::move(split.uncertain);
    out->num_uncertain += pt.uncertain.size();
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
