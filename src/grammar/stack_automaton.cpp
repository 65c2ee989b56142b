#include "grammar/stack_automaton.h"

#include <algorithm>
#include <map>

namespace tessera::grammar {

size_t StackAutomaton::VectorHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (int32_t x : v) {
    h ^= static_cast<uint32_t>(x);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

StackAutomaton::StackAutomaton(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  nodes_.push_back({-1, -1});  // kBottom
  mark_.push_back(0);
  members_.emplace_back();     // kDeadState
  can_end_.push_back(0);
  state_ids_.emplace(std::vector<int32_t>{}, kDeadState);
  // Byte classes: bytes with the same membership in every byte set.
  std::map<std::vector<uint32_t>, uint16_t> classes;
  const auto& sets = grammar_->byte_sets;
  for (int b = 0; b < 256; ++b) {
    std::vector<uint32_t> signature((sets.size() + 31) / 32, 0);
    for (size_t i = 0; i < sets.size(); ++i) {
      if (sets[i].test(static_cast<uint8_t>(b))) signature[i / 32] |= uint32_t{1} << (i % 32);
    }
    auto [it, inserted] = classes.emplace(std::move(signature), static_cast<uint16_t>(classes.size()));
    class_of_[b] = it->second;
  }
  num_classes_ = classes.size();
  transitions_.assign(num_classes_, kDeadState);
}

int32_t StackAutomaton::node(int32_t position, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
                       static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes) overflowed_ = true;
    nodes_.push_back({position, parent});
    mark_.push_back(0);
  }
  return it->second;
}

void StackAutomaton::close(int32_t start) {
  const auto& elements = grammar_->elements;
  work_.clear();
  work_.push_back(start);
  while (!work_.empty() && !overflowed_) {
    const int32_t n = work_.back();
    work_.pop_back();
    if (mark_[n] == stamp_) continue;
    mark_[n] = stamp_;
    if (n == kBottom) {
      scratch_.push_back(kBottom);
      continue;
    }
    const Node nd = nodes_[n];
    const Element& el = elements[nd.position];
    switch (el.kind) {
      case Element::kBytes:
        scratch_.push_back(n);
        if (scratch_.size() > kMaxTops) overflowed_ = true;
        break;
      case Element::kEnd:
        work_.push_back(nd.parent);
        break;
      case Element::kRule: {
        const int32_t ret = elements[nd.position + 1].kind == Element::kEnd
                                ? nd.parent
                                : node(nd.position + 1, nd.parent);
        for (int32_t alt : grammar_->rule_alts[el.index]) work_.push_back(node(alt, ret));
        break;
      }
    }
  }
}

int32_t StackAutomaton::intern_scratch() {
  if (overflowed_) {
    scratch_.clear();
    return kDeadState;
  }
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  auto it = state_ids_.find(scratch_);
  if (it != state_ids_.end()) {
    scratch_.clear();
    return it->second;
  }
  if (members_.size() >= kMaxStates) {
    overflowed_ = true;
    scratch_.clear();
    return kDeadState;
  }
  const auto id = static_cast<int32_t>(members_.size());
  members_.push_back(scratch_);
  can_end_.push_back(scratch_[0] == kBottom);
  state_ids_.emplace(scratch_, id);
  transitions_.resize(transitions_.size() + num_classes_, -1);
  scratch_.clear();
  return id;
}

int32_t StackAutomaton::start_state() {
  ++stamp_;
  scratch_.clear();
  for (int32_t alt : grammar_->rule_alts[grammar_->root]) close(node(alt, kBottom));
  return intern_scratch();
}

int32_t StackAutomaton::position_state(int32_t pos) { return node_state(node(pos, kBottom)); }

int32_t StackAutomaton::node_state(int32_t n) {
  ++stamp_;
  scratch_.clear();
  close(n);
  return intern_scratch();
}

int32_t StackAutomaton::build_step(int32_t state, uint8_t byte) {
  const size_t index = static_cast<size_t>(state) * num_classes_ + class_of_[byte];
  ++stamp_;
  scratch_.clear();
  const auto& elements = grammar_->elements;
  // members_ may grow inside close() only through nodes_, never members_: safe to iterate.
  for (int32_t n : members_[state]) {
    if (n == kBottom) continue;
    const Node nd = nodes_[n];
    if (grammar_->byte_sets[elements[nd.position].index].test(byte)) {
      close(node(nd.position + 1, nd.parent));
    }
  }
  const int32_t next = intern_scratch();
  transitions_[index] = next;  // slot may have moved
  return next;
}

int32_t StackAutomaton::step_bytes(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDeadState) break;
    state = step(state, static_cast<uint8_t>(c));
  }
  return state;
}

}  // namespace tessera::grammar
