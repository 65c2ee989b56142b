// StackAutomaton: the pushdown matcher of a Grammar, as persistent stacks plus a lazily built DFA
// over sets of stack tops.
//
// A stack is a chain of immutable nodes {position, parent}: `position` is where matching goes on
// in a rule alternative (an index into Grammar::elements), `parent` the node to return to when
// the alternative ends. Nodes are hash-consed (one id per distinct {position, parent}), so two
// stacks share their common bottom and equal stacks are equal ids. Node 0 is the bottom: the
// empty stack. Calling a rule as the last element of an alternative reuses the caller's parent
// (a tail call), so `x*` (R ::= x R | "") runs in constant stack depth.
//
// A state is the set of stack tops that are possible after the bytes so far: nodes whose
// position is a byte set, plus node 0 when every frame could be closed. States are interned
// (sorted node ids -> state id), and step(state, byte) is memoized in a [states][byte classes]
// table (bytes that lie in exactly the same byte sets of the grammar step alike: a JSON grammar
// has a few dozen classes, so a new state costs that many closures, not 256), so
// once the automaton has seen a stack context, advancing is one array read. State 0 is dead (the
// empty set). Advance, rollback and fork of a matcher are then integers: a state id per token.
//
// The same machinery classifies tokens context-free: position_state(p) starts from the single
// frame {p, bottom}; reaching node 0 there means "the frame was left, the rest depends on the
// stack below" (see token_masks.h).
//
// Not thread-safe: one thread at a time (the matchers of one request, or one compile).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

class StackAutomaton {
 public:
  static constexpr int32_t kBottom = 0;     // node id of the empty stack
  static constexpr int32_t kDeadState = 0;  // state id of the empty set
  // Limits: past them the automaton reports overflow and every new step is dead.
  static constexpr size_t kMaxNodes = size_t{1} << 22;
  static constexpr size_t kMaxTops = 1 << 14;
  static constexpr size_t kMaxStates = size_t{1} << 18;

  explicit StackAutomaton(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  int32_t start_state();                 // the root rule's alternatives over the bottom
  int32_t position_state(int32_t pos);   // the single frame {pos, bottom}, closed
  // The closure of one stack (node id from node()): a state.
  int32_t node_state(int32_t node);
  // The node {position, parent} (hash-consed).
  int32_t node(int32_t position, int32_t parent);
  int32_t step(int32_t state, uint8_t byte) {  // inline: token walks call it per byte
    const int32_t next = transitions_[static_cast<size_t>(state) * num_classes_ + class_of_[byte]];
    return next >= 0 ? next : build_step(state, byte);
  }
  int32_t step_bytes(int32_t state, std::string_view bytes);  // kDeadState as soon as it dies

  bool is_dead(int32_t state) const { return state == kDeadState; }
  // True when the empty stack is among the state's possibilities (the grammar can end here).
  bool can_end(int32_t state) const { return can_end_[state] != 0; }
  // Sorted node ids: byte-set tops (and node 0 first when can_end).
  std::span<const int32_t> members(int32_t state) const { return members_[state]; }
  int32_t node_position(int32_t node) const { return nodes_[node].position; }
  bool overflowed() const { return overflowed_; }
  size_t num_states() const { return members_.size(); }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    int32_t position;
    int32_t parent;
  };
  struct VectorHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  int32_t build_step(int32_t state, uint8_t byte);  // a transition not memoized yet
  // Adds to scratch_ every top reachable from `start` without consuming a byte.
  void close(int32_t start);
  int32_t intern_scratch();  // sorts and dedupes scratch_, returns its state id

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> members_;               // [states] sorted node ids
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> state_ids_;
  std::vector<int32_t> transitions_;                        // [states * num_classes_], -1 = not built yet
  std::array<uint16_t, 256> class_of_{};                    // byte -> its class
  size_t num_classes_ = 0;
  std::vector<uint8_t> can_end_;                            // [states] members_ starts with kBottom
  std::vector<uint32_t> mark_;                              // [nodes] closure visit stamps
  uint32_t stamp_ = 0;
  std::vector<int32_t> scratch_, work_;
  bool overflowed_ = false;
};

}  // namespace tessera::grammar
