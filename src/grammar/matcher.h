// GrammarMatcher: one generation's place in a CompiledGrammar.
//
//   accept_token(id)   advance by a token's bytes (false, and no change, when not allowed)
//   rollback(k)        forget the last k accepted tokens (rejected speculative drafts)
//   fork()             an independent copy (n > 1 samples); shares the automaton, O(tokens)
//   fill_mask(mask)    the allowed next tokens, [mask_words(vocab)] bits
//
// State: the automaton state id after each accepted token (history), so rollback pops integers.
// The StackAutomaton is shared with forks: matchers of one request must be used from one thread
// at a time (the engine thread, or whoever it hands the request to).
//
// Stop tokens (EOS...) are allowed exactly where the grammar can end; accepting one terminates
// the matcher. is_complete() is true once nothing but the end is possible: the request stops.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/stack_automaton.h"

namespace tessera::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled);

  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, the differential harness); all or nothing.
  bool accept_bytes(std::string_view bytes);
  // Whether `id` would be accepted now (no change).
  bool allows_token(int32_t id);
  void rollback(int32_t num_tokens);
  GrammarMatcher fork() const { return *this; }

  void fill_mask(std::span<uint64_t> mask);

  bool can_end() const;          // a stop token is allowed now
  bool is_terminated() const;    // a stop token was accepted
  bool is_complete() const;      // terminated, or no byte can follow
  int32_t num_accepted_tokens() const { return static_cast<int32_t>(history_.size()) - 1; }
  const CompiledGrammar& compiled() const { return *compiled_; }
  // Size of the shared automaton (tests of sharing and growth).
  size_t automaton_states() const { return automaton_->num_states(); }

 private:
  static constexpr int32_t kTerminated = -1;
  int32_t state() const { return history_.back(); }

  std::shared_ptr<const CompiledGrammar> compiled_;
  std::shared_ptr<StackAutomaton> automaton_;
  std::vector<int32_t> history_;  // [1 + accepted tokens] automaton state ids (or kTerminated)
  std::vector<int32_t> candidates_, path_;  // fill_mask scratch
  std::vector<uint64_t> scratch_;           // [mask words] fill_mask scratch
};

}  // namespace tessera::grammar
