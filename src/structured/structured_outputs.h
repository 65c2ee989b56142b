// StructuredOutputs: the engine's one door to structured outputs (JSON object / JSON Schema, regex,
// choice, grammar text). It owns what the engine used to keep for them: the compiled grammars
// (cached by text), a matcher per (request, sample), the step's allowed-token masks and the
// persistent worker thread that computes them while the forward runs.
//
//   submit (any thread)     compile(so)                  the request's grammar, or null (none)
//   admission (engine)      add(request_id, grammar, n)  one matcher per sample
//   each step (engine):
//     before the forward    start_masks(out)             the worker walks each constrained row
//     after the forward     wait_masks() -> [seqs] spans  ready masks, one span per out.seqs[i]
//     after the scheduler   commit(updates) -> ends      matchers advance by the accepted tokens
//   request gone (engine)   remove(request_id)
//
// Speculation goes through the same two calls: start_masks validates a sequence's draft tokens
// (row j's mask is the matcher's after drafts [0, j); a draft the grammar refuses ends the walk,
// so that row's mask rejects it) and rolls the matcher back to the committed tokens; commit then
// advances it by what verification accepted.
//
// Threads: compile() is thread-safe (the cache locks). Everything else is the engine thread's;
// between start_masks and wait_masks the worker reads the matchers, so add/remove/commit check
// that no mask job is running.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "sched/scheduler_output.h"
#include "tessera/sampling_params.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace tessera::structured {

using Grammar = std::shared_ptr<const grammar::CompiledGrammar>;

// The vocabulary as the grammar engine sees it: each token's bytes (none for control and
// user-defined tokens, which no grammar can match) and the end-of-generation ids.
grammar::TokenVocabulary grammar_vocabulary(const tokenizer::Tokenizer& tok);

// The grammar text of a request's structured output (the JSON Schema, regex and choice front
// ends of grammar/); an error for kNone or input a front end refuses.
Result<std::string> structured_output_grammar(const StructuredOutput& so);

// A sequence the grammar ended this step (commit's result).
struct SequenceEnd {
  int64_t seq_id = 0;
  int64_t request_id = 0;
  int32_t sample_index = 0;
  // kFinishedStopped: the grammar is complete (nothing but the end can follow), as a stop string
  // would end it; kFinishedError: a committed token is outside the grammar (the masks let only
  // allowed tokens through, so this is an engine bug: end the sample rather than emit text
  // outside the grammar).
  sched::RequestStatus status = sched::RequestStatus::kFinishedStopped;
  const char* error = "";  // the error text of kFinishedError
};

class StructuredOutputs {
 public:
  // vocab_size: the model's logits row width (the masks' bits; may exceed the tokenizer's).
  StructuredOutputs(const tokenizer::Tokenizer& tok, int32_t vocab_size);
  ~StructuredOutputs();  // stops and joins the worker
  StructuredOutputs(const StructuredOutputs&) = delete;
  StructuredOutputs& operator=(const StructuredOutputs&) = delete;

  // Any thread. The compiled grammar of `so` (from the cache when its text was seen), null for
  // kNone; kInvalidArgument-style errors from the front ends and the parser.
  Result<Grammar> compile(const StructuredOutput& so);

  // Engine thread. A request's samples start at the grammar's root (a null grammar: nothing).
  void add(int64_t request_id, const Grammar& grammar, int32_t num_samples);
  void remove(int64_t request_id);
  bool has(int64_t request_id) const { return requests_.count(request_id) != 0; }

  // Starts the masks of the step's constrained sequences that need logits on the worker; returns
  // at once. Every call is followed by wait_masks() before any other call.
  void start_masks(const sched::SchedulerOutput& out);
  // Waits for the job; then per out.seqs[i] the [(num_spec_tokens + 1) x mask_words(vocab)]
  // bitsets of its logits rows (bit t of word t / 64 = token t allowed), empty when unconstrained.
  // Valid until the next start_masks.
  std::span<const std::span<const uint64_t>> wait_masks();

  // Advances each update's sample by its new tokens (the scheduler's, after stop truncation) and
  // returns the sequences the grammar ended.
  const std::vector<SequenceEnd>& commit(std::span<const sched::RequestUpdate> updates);

 private:
  struct RequestGrammar {
    Grammar grammar;
    std::vector<grammar::GrammarMatcher> samples;  // [n]
  };
  // One constrained row set of the step: its matcher, draft tokens, first mask word.
  struct MaskJob {
    grammar::GrammarMatcher* matcher;
    std::span<const int32_t> drafts;  // [k] the sequence's draft tokens (its last k token_ids)
    size_t offset;                    // into masks_, [(k + 1) * words_]
    size_t seq_index;                 // in the step's out.seqs
  };
  grammar::GrammarMatcher* matcher_of(int64_t request_id, int32_t sample_index);
  void compute_masks();  // the worker's job: every MaskJob of the step
  void worker_loop();
  void check_idle() const;

  grammar::GrammarCache cache_;
  size_t words_ = 0;  // mask_words(vocab)
  std::unordered_map<int64_t, RequestGrammar> requests_;  // by request id
  // The step (capacity kept from step to step).
  std::vector<MaskJob> jobs_;
  std::vector<uint64_t> masks_;
  std::vector<std::span<const uint64_t>> spans_;  // [out.seqs.size()]
  std::vector<SequenceEnd> ends_;
  bool job_started_ = false;  // engine thread: between start_masks and wait_masks

  // The worker: one persistent thread, one job at a time.
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;  // a job posted, not yet finished
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace tessera::structured
