// The rule-level passes of parse_grammar (grammar_rules.h): the left-recursion check over the
// parsed rules, flattening them into a Grammar, and the readable dump of a Grammar.
#include "grammar/grammar_rules.h"

#include <algorithm>
#include <cstdio>

namespace tessera::grammar {

Status check_left_recursion(const std::vector<RuleDef>& rules) {
  const size_t n = rules.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules[r].alts) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Item& it) {
          return it.kind == Element::kRule && nullable[it.index];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Left-corner edges: r -> s when s can start r with no byte consumed before it. A cycle of
  // them loops the matcher forever only if some edge on it is not a tail call (a tail call
  // reuses its caller's frame, and hash-consed frames make the loop a revisit), e.g.
  // `a ::= a "x"` is refused, `r ::= x? r | ""` (what `(x?)*` becomes) is fine.
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  std::vector<std::vector<int32_t>> reverse(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules[r].alts) {
      for (size_t k = 0; k < alt.size(); ++k) {
        if (alt[k].kind != Element::kRule) break;
        edges[r].push_back({alt[k].index, k + 1 == alt.size()});
        reverse[alt[k].index].push_back(static_cast<int32_t>(r));
        if (!nullable[alt[k].index]) break;
      }
    }
  }
  // Kosaraju, iteratively: finish order on the graph, then components on the reverse.
  std::vector<int32_t> order;
  std::vector<uint8_t> seen(n, 0);
  for (size_t start = 0; start < n; ++start) {
    if (seen[start]) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(start), 0}};
    seen[start] = 1;
    while (!stack.empty()) {
      auto& [r, e] = stack.back();
      if (e == edges[r].size()) {
        order.push_back(r);
        stack.pop_back();
        continue;
      }
      const int32_t to = edges[r][e++].to;
      if (!seen[to]) {
        seen[to] = 1;
        stack.push_back({to, 0});
      }
    }
  }
  std::vector<int32_t> component(n, -1);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (component[*it] >= 0) continue;
    std::vector<int32_t> stack{*it};
    component[*it] = *it;
    while (!stack.empty()) {
      const int32_t r = stack.back();
      stack.pop_back();
      for (int32_t from : reverse[r]) {
        if (component[from] < 0) component[from] = *it, stack.push_back(from);
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && component[e.to] == component[r]) {
        return Error{ErrorCode::kInvalidArgument,
                     "grammar: left recursion through rule '" + rules[e.to].name + "'"};
      }
    }
  }
  return ok_status();
}

// Only rules reachable from root are kept (renumbered in order of first reach, root first), so
// unused library rules (the JSON front end's formats) cost nothing downstream.
Grammar flatten_rules(const std::vector<RuleDef>& rules, std::vector<ByteSet> byte_sets, int32_t root) {
  std::vector<int32_t> new_id(rules.size(), -1);
  std::vector<int32_t> order{root};
  new_id[root] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& alt : rules[order[i]].alts) {
      for (const auto& it : alt) {
        if (it.kind == Element::kRule && new_id[it.index] < 0) {
          new_id[it.index] = static_cast<int32_t>(order.size());
          order.push_back(it.index);
        }
      }
    }
  }
  Grammar g;
  g.root = 0;
  g.byte_sets = std::move(byte_sets);
  g.rule_alts.resize(order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    const RuleDef& rule = rules[order[r]];
    g.rule_names.push_back(rule.name);
    for (const auto& alt : rule.alts) {
      g.rule_alts[r].push_back(static_cast<int32_t>(g.elements.size()));
      for (const auto& it : alt) {
        g.elements.push_back({it.kind, it.kind == Element::kRule ? new_id[it.index] : it.index});
      }
      g.elements.push_back({Element::kEnd, static_cast<int32_t>(r)});
    }
  }
  return g;
}

std::string Grammar::to_string() const {
  std::string out;
  auto byte_set_text = [](const ByteSet& s) {
    std::string t = "[";
    for (int b = 0; b < 256; ++b) {
      if (!s.test(static_cast<uint8_t>(b))) continue;
      int e = b;
      while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
      char buf[16];
      snprintf(buf, sizeof buf, "\\x%02X", b);
      t += buf;
      if (e > b) {
        snprintf(buf, sizeof buf, "-\\x%02X", e);
        t += buf;
      }
      b = e;
    }
    return t + "]";
  };
  for (int32_t r = 0; r < num_rules(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < rule_alts[r].size(); ++a) {
      if (a) out += " |";
      for (int32_t p = rule_alts[r][a]; elements[p].kind != Element::kEnd; ++p) {
        out += " ";
        out += elements[p].kind == Element::kBytes ? byte_set_text(byte_sets[elements[p].index])
                                                   : rule_names[elements[p].index];
      }
      if (elements[rule_alts[r][a]].kind == Element::kEnd) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tessera::grammar
