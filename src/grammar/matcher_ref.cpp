#include "grammar/matcher_ref.h"

namespace tessera::grammar {

RefMatcher::RefMatcher(const Grammar& grammar) : grammar_(grammar) {
  for (int32_t alt : grammar_.rule_alts[grammar_.root]) close({alt}, stacks_);
}

// Moves every stack to a byte-set top (or to empty), trying each alternative of each rule call.
// A call that is the last element of an alternative pushes no return position (tail call), as
// in the fast matcher, so `x*` keeps a bounded stack; `seen` stops epsilon cycles.
void RefMatcher::close(Stack start, std::set<Stack>& out) const {
  std::set<Stack> seen;
  std::vector<Stack> work{std::move(start)};
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (!seen.insert(s).second) continue;
    if (s.empty()) {
      out.insert(s);
      continue;
    }
    const int32_t pos = s.back();
    const Element& el = grammar_.elements[pos];
    if (el.kind == Element::kBytes) {
      out.insert(s);
    } else if (el.kind == Element::kEnd) {
      s.pop_back();
      work.push_back(s);
    } else {
      s.pop_back();
      if (grammar_.elements[pos + 1].kind != Element::kEnd) s.push_back(pos + 1);
      for (int32_t alt : grammar_.rule_alts[el.index]) {
        Stack t = s;
        t.push_back(alt);
        work.push_back(std::move(t));
      }
    }
  }
}

std::set<RefMatcher::Stack> RefMatcher::advance(const std::set<Stack>& stacks, uint8_t byte) const {
  std::set<Stack> out;
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const Element& el = grammar_.elements[s.back()];
    if (!grammar_.byte_sets[el.index].test(byte)) continue;
    Stack t = s;
    t.back() += 1;
    close(std::move(t), out);
  }
  return out;
}

bool RefMatcher::would_accept(std::string_view bytes) const {
  std::set<Stack> cur = stacks_;
  for (char c : bytes) {
    cur = advance(cur, static_cast<uint8_t>(c));
    if (cur.empty()) return false;
  }
  return true;
}

bool RefMatcher::accept_bytes(std::string_view bytes) {
  std::set<Stack> cur = stacks_;
  for (char c : bytes) {
    cur = advance(cur, static_cast<uint8_t>(c));
    if (cur.empty()) return false;
  }
  stacks_ = std::move(cur);
  return true;
}

bool RefMatcher::can_end() const { return stacks_.count(Stack{}) > 0; }

std::vector<bool> RefMatcher::allowed_tokens(const TokenVocabulary& vocab) const {
  std::vector<bool> allowed(vocab.bytes.size(), false);
  for (size_t id = 0; id < vocab.bytes.size(); ++id) {
    if (!vocab.bytes[id].empty()) allowed[id] = would_accept(vocab.bytes[id]);
  }
  for (int32_t id : vocab.stop_ids) {
    if (id >= 0 && static_cast<size_t>(id) < allowed.size()) allowed[id] = can_end();
  }
  return allowed;
}

}  // namespace tessera::grammar
