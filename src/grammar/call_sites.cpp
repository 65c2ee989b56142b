#include "grammar/call_sites.h"

#include <algorithm>
#include <map>
#include <span>

namespace tessera::grammar {
namespace {

// recursive[r]: r lies on a cycle of calls other than a self tail call (Tarjan, iterative).
std::vector<uint8_t> recursive_rules(const Grammar& g) {
  const auto n = static_cast<size_t>(g.num_rules());
  std::vector<std::vector<int32_t>> callees(n);
  std::vector<uint8_t> recursive(n, 0);
  for (int32_t r = 0; r < g.num_rules(); ++r) {
    for (int32_t start : g.rule_alts[r]) {
      for (int32_t p = start; g.elements[p].kind != Element::kEnd; ++p) {
        if (g.elements[p].kind != Element::kRule) continue;
        const int32_t c = g.elements[p].index;
        if (c == r) {
          if (g.elements[p + 1].kind != Element::kEnd) recursive[r] = 1;  // non-tail self call
          continue;
        }
        callees[r].push_back(c);
      }
    }
  }
  std::vector<int32_t> index(n, -1), low(n, 0), stack;
  std::vector<uint8_t> on_stack(n, 0);
  int32_t next_index = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> frames{{static_cast<int32_t>(root), 0}};
    index[root] = low[root] = next_index++;
    stack.push_back(static_cast<int32_t>(root));
    on_stack[root] = 1;
    while (!frames.empty()) {
      auto& [r, e] = frames.back();
      if (e < callees[r].size()) {
        const int32_t c = callees[r][e++];
        if (index[c] < 0) {
          index[c] = low[c] = next_index++;
          stack.push_back(c);
          on_stack[c] = 1;
          frames.push_back({c, 0});
        } else if (on_stack[c]) {
          low[r] = std::min(low[r], index[c]);
        }
        continue;
      }
      const int32_t done = r;
      frames.pop_back();
      if (!frames.empty()) low[frames.back().first] = std::min(low[frames.back().first], low[done]);
      if (low[done] != index[done]) continue;
      std::vector<int32_t> component;
      for (int32_t m = -1; m != done;) {
        m = stack.back();
        stack.pop_back();
        on_stack[m] = 0;
        component.push_back(m);
      }
      if (component.size() > 1) {
        for (int32_t m : component) recursive[m] = 1;
      }
    }
  }
  return recursive;
}

// Chains of x{0,n}: see call_sites.h. rule_class[r] equal for rules of equal language.
class Chains {
 public:
  Chains(const Grammar& g, std::span<const int32_t> rule_class) : g_(g), class_(rule_class) {
    sites_.assign(static_cast<size_t>(g.num_rules()), 0);
    sites_[g.root] = 1;  // entered at the start
    for (int32_t r = 0; r < g.num_rules(); ++r) {
      for (int32_t start : g.rule_alts[r]) {
        for (int32_t p = start; g.elements[p].kind != Element::kEnd; ++p) {
          const Element& el = g.elements[p];
          const bool self_tail = el.index == r && g.elements[p + 1].kind == Element::kEnd;
          if (el.kind == Element::kRule && !self_tail) ++sites_[el.index];
        }
      }
    }
    state_.assign(sites_.size(), kUnchecked);
    pairs_.tighter.assign(static_cast<size_t>(g.num_positions()), -1);
    pairs_.slack.assign(static_cast<size_t>(g.num_positions()), -1);
    // nullable_[r]: some alternative of r matches "" (fixpoint over the rules).
    nullable_.assign(sites_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (int32_t r = 0; r < g.num_rules(); ++r) {
        if (nullable_[r]) continue;
        for (int32_t start : g.rule_alts[r]) {
          int32_t p = start;
          while (g.elements[p].kind == Element::kRule && nullable_[g.elements[p].index]) ++p;
          if (g.elements[p].kind == Element::kEnd) {
            nullable_[r] = 1, changed = true;
            break;
          }
        }
      }
    }
  }

  // Every item x directly followed by a call to a link L with the same x (inside a chain, or
  // the last mandatory copy of x{m,n}) pairs with L's item: x L ... contains x L' ... .
  TighterPairs run() {
    for (int32_t p = 0; p + 1 < g_.num_positions(); ++p) {
      const Element& next = g_.elements[p + 1];
      if (g_.elements[p].kind == Element::kEnd || next.kind != Element::kRule) continue;
      if (!is_link(next.index)) continue;
      const int32_t item = g_.rule_alts[next.index][0];
      if (!same_item(p, item)) continue;
      const Element& x = g_.elements[item];
      const bool bounded = x.kind == Element::kBytes || !nullable_[x.index];
      pair_items(p, item, bounded ? links_after(next.index) : -1);
    }
    return std::move(pairs_);
  }

 private:
  // A link has alternatives [x, L'] and [] where L' is a link with the same x, or [x] and []
  // (the last link), and one caller: L(link) contains L(L') (and "", for the last).
  enum : int8_t { kUnchecked, kNotLink, kLast, kInner };
  bool is_link(int32_t r) {
    if (state_[r] == kUnchecked) {
      state_[r] = kNotLink;  // provisional: a cycle of calls is no chain
      state_[r] = check_link(r);
    }
    return state_[r] != kNotLink;
  }
  int8_t check_link(int32_t r) {
    const auto& alts = g_.rule_alts[r];
    if (sites_[r] != 1 || alts.size() != 2 || g_.elements[alts[1]].kind != Element::kEnd) return kNotLink;
    const int32_t a = alts[0];
    if (g_.elements[a].kind == Element::kEnd) return kNotLink;
    if (g_.elements[a + 1].kind == Element::kEnd) return kLast;
    const Element& next = g_.elements[a + 1];
    if (next.kind != Element::kRule || g_.elements[a + 2].kind != Element::kEnd) return kNotLink;
    if (next.index == r || !is_link(next.index)) return kNotLink;
    return same_item(a, g_.rule_alts[next.index][0]) ? kInner : kNotLink;
  }
  // Links after `link` in its chain: the further items its x may be followed by.
  int32_t links_after(int32_t link) const {
    int32_t n = 0;
    for (int32_t r = link; state_[r] == kInner; ++n) r = g_.elements[g_.rule_alts[r][0] + 1].index;
    return n;
  }
  bool same_item(int32_t a, int32_t b) const {
    const Element& x = g_.elements[a];
    const Element& y = g_.elements[b];
    if (x.kind != y.kind) return false;
    return x.kind == Element::kBytes ? x.index == y.index : class_[x.index] == class_[y.index];
  }
  // tighter[] for the item at a and its copy at b, and for everything copied below them; a
  // rule they share, or one with other callers, keeps its own frames.
  void pair_items(int32_t a, int32_t b, int32_t slack) {
    const Element& x = g_.elements[a];
    const Element& y = g_.elements[b];
    if (x.kind == Element::kBytes) {
      pairs_.tighter[a] = b;
      pairs_.slack[a] = slack;
      return;
    }
    if (x.index == y.index || sites_[x.index] != 1 || sites_[y.index] != 1) return;
    // An instance's alternatives are contiguous, and two copies of one rule have one layout.
    const int32_t start_a = g_.rule_alts[x.index][0], start_b = g_.rule_alts[y.index][0];
    int32_t end_a = g_.rule_alts[x.index].back();
    while (g_.elements[end_a].kind != Element::kEnd) ++end_a;
    for (int32_t i = 0; start_a + i < end_a; ++i) {
      const Element& e = g_.elements[start_a + i];
      if (e.kind == Element::kBytes) {
        pairs_.tighter[start_a + i] = start_b + i;
        pairs_.slack[start_a + i] = slack;
      } else if (e.kind == Element::kRule && e.index != x.index) {
        pair_items(start_a + i, start_b + i, slack);
      }
    }
  }

  const Grammar& g_;
  std::span<const int32_t> class_;
  std::vector<int32_t> sites_;
  std::vector<int8_t> state_;
  std::vector<uint8_t> nullable_;
  TighterPairs pairs_;
};

class Expander {
 public:
  Expander(const Grammar& source, int32_t max_positions)
      : src_(source), max_positions_(max_positions), recursive_(recursive_rules(source)) {}

  ExpandedGrammar run() {
    out_.grammar.byte_sets = src_.byte_sets;
    out_.grammar.root = shared(src_.root);
    // Instances are filled in creation order; filling one may create more.
    for (size_t i = 0; i < sources_.size(); ++i) fill(static_cast<int32_t>(i));
    out_.pairs = tighter_positions(out_.grammar, sources_);
    return std::move(out_);
  }

 private:
  int32_t rule_size(int32_t r) const {
    int32_t size = 0;
    for (int32_t start : src_.rule_alts[r]) {
      for (int32_t p = start;; ++p, ++size) {
        if (src_.elements[p].kind == Element::kEnd) break;
      }
      ++size;
    }
    return size;
  }

  int32_t new_instance(int32_t r) {
    const auto id = static_cast<int32_t>(sources_.size());
    sources_.push_back(r);
    const int32_t copies = ++copies_[r];
    out_.grammar.rule_names.push_back(copies == 1 ? src_.rule_names[r]
                                                  : src_.rule_names[r] + "@" + std::to_string(copies));
    out_.grammar.rule_alts.emplace_back();
    planned_ += rule_size(r);
    return id;
  }
  // The one instance of r that every site without its own copy calls.
  int32_t shared(int32_t r) {
    auto [it, inserted] = shared_.emplace(r, -1);
    if (inserted) it->second = new_instance(r);
    return it->second;
  }
  int32_t callee(int32_t c) {
    if (recursive_[c] || planned_ + rule_size(c) > max_positions_) return shared(c);
    return new_instance(c);
  }

  void fill(int32_t id) {
    const int32_t r = sources_[id];
    Grammar& g = out_.grammar;
    for (int32_t start : src_.rule_alts[r]) {
      g.rule_alts[id].push_back(g.num_positions());
      for (int32_t p = start;; ++p) {
        Element el = src_.elements[p];
        if (el.kind == Element::kRule) {
          el.index = el.index == r && !recursive_[r] ? id : callee(el.index);
        } else if (el.kind == Element::kEnd) {
          el.index = id;
        }
        g.elements.push_back(el);
        out_.origin.push_back(p);
        if (el.kind == Element::kEnd) break;
      }
    }
  }

  const Grammar& src_;
  const int32_t max_positions_;
  const std::vector<uint8_t> recursive_;
  ExpandedGrammar out_;
  std::vector<int32_t> sources_;       // [instances] the source rule of each
  std::map<int32_t, int32_t> shared_;  // source rule -> its shared instance
  std::map<int32_t, int32_t> copies_;  // source rule -> instances so far (for names)
  int32_t planned_ = 0;                // positions of every instance created
};

}  // namespace

TighterPairs tighter_positions(const Grammar& g, std::span<const int32_t> rule_class) {
  return Chains(g, rule_class).run();
}

ExpandedGrammar expand_call_sites(const Grammar& source, int32_t max_positions) {
  return Expander(source, max_positions).run();
}

}  // namespace tessera::grammar
