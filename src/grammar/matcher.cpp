#include "grammar/matcher.h"

#include <algorithm>

namespace tessera::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)),
      automaton_(std::make_shared<StackAutomaton>(compiled_->grammar)) {
  history_.push_back(automaton_->start_state());
}

bool GrammarMatcher::can_end() const {
  return state() != kTerminated && automaton_->can_end(state());
}
bool GrammarMatcher::is_terminated() const { return state() == kTerminated; }
bool GrammarMatcher::is_complete() const {
  if (is_terminated()) return true;
  const auto members = automaton_->members(state());
  return members.size() == 1 && members[0] == StackAutomaton::kBottom;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenTable& tokens = *compiled_->tokens;
  if (is_terminated() || id < 0 || id >= tokens.vocab_size()) return false;
  if (tokens.is_stop(id)) {
    if (!can_end()) return false;
    history_.push_back(kTerminated);
    return true;
  }
  const std::string_view bytes = tokens.bytes(id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  const int32_t next = automaton_->step_bytes(state(), bytes);
  if (automaton_->is_dead(next)) return false;
  history_.push_back(next);
  return true;
}

bool GrammarMatcher::allows_token(int32_t id) {
  const TokenTable& tokens = *compiled_->tokens;
  if (is_terminated() || id < 0 || id >= tokens.vocab_size()) return false;
  if (tokens.is_stop(id)) return can_end();
  const std::string_view bytes = tokens.bytes(id);
  return !bytes.empty() && !automaton_->is_dead(automaton_->step_bytes(state(), bytes));
}

void GrammarMatcher::rollback(int32_t num_tokens) {
  const auto keep = std::max<int64_t>(1, static_cast<int64_t>(history_.size()) - num_tokens);
  history_.resize(static_cast<size_t>(keep));
}

void GrammarMatcher::fill_mask(std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  if (is_terminated()) return;
  const TokenTable& tokens = *compiled_->tokens;
  const int32_t start = state();
  const auto normal = tokens.normal_mask();
  // 1. Context-independent accepted sets of every top (tops of one position share a set).
  candidates_.clear();
  const TokenSet* last = nullptr;
  for (int32_t node : automaton_->members(start)) {
    if (node == StackAutomaton::kBottom) continue;
    const PositionTokens& pt = compiled_->positions[automaton_->node_position(node)];
    if (pt.accepted.get() != last) pt.accepted->add_to(mask, normal, scratch_);
    last = pt.accepted.get();
    candidates_.insert(candidates_.end(), pt.uncertain.begin(), pt.uncertain.end());
  }
  // 2. Uncertain tokens against the real stacks, in trie order, one state per prefix depth.
  std::sort(candidates_.begin(), candidates_.end());
  candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  path_.assign(1, start);
  std::string_view prev;
  for (int32_t rank : candidates_) {
    const int32_t id = tokens.sorted()[rank];
    if (mask_test(mask, id)) continue;
    const std::string_view bytes = tokens.sorted_bytes(rank);
    size_t d = 0;
    const size_t reuse = std::min(prev.size(), path_.size() - 1);
    while (d < reuse && d < bytes.size() && prev[d] == bytes[d]) ++d;
    path_.resize(d + 1);
    while (d < bytes.size() && !automaton_->is_dead(path_[d])) {
      path_.push_back(automaton_->step(path_[d], static_cast<uint8_t>(bytes[d])));
      ++d;
    }
    prev = bytes.substr(0, path_.size() - 1);
    if (d == bytes.size() && !automaton_->is_dead(path_[d])) mask_set(mask, id);
  }
  // 3. Stop tokens where the grammar can end.
  if (automaton_->can_end(start)) {
    for (int32_t id : tokens.stop_ids()) {
      if (id >= 0 && id < tokens.vocab_size()) mask_set(mask, id);
    }
  }
}

}  // namespace tessera::grammar
