#include "structured/structured_outputs.h"

#include <algorithm>

#include "grammar/json_schema.h"
#include "grammar/regex_to_grammar.h"
#include "util/check.h"

namespace tessera::structured {

grammar::TokenVocabulary grammar_vocabulary(const tokenizer::Tokenizer& tok) {
  grammar::TokenVocabulary v;
  v.bytes.resize(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special(id)) v.bytes[static_cast<size_t>(id)] = tok.token_to_piece(id);
  }
  v.stop_ids = tok.eog_ids();
  return v;
}

Result<std::string> structured_output_grammar(const StructuredOutput& so) {
  grammar::JsonSchemaOptions json;
  json.whitespace = so.any_whitespace ? grammar::JsonWhitespace::kAny : grammar::JsonWhitespace::kCompact;
  switch (so.kind) {
    case StructuredOutput::Kind::kNone: return Error{ErrorCode::kInternal, "no structured output"};
    case StructuredOutput::Kind::kJsonObject: return grammar::json_object_grammar(json);
    case StructuredOutput::Kind::kJsonSchema: return grammar::json_schema_to_grammar(so.text, json);
    case StructuredOutput::Kind::kRegex: return grammar::regex_to_grammar(so.text);
    case StructuredOutput::Kind::kGrammar: return so.text;
    case StructuredOutput::Kind::kChoice: return grammar::choice_to_grammar(so.choices);
  }
  return Error{ErrorCode::kInternal, "unknown structured output kind"};
}

StructuredOutputs::StructuredOutputs(const tokenizer::Tokenizer& tok, int32_t vocab_size)
    : cache_(std::make_shared<const grammar::TokenTable>(grammar_vocabulary(tok))),
      words_(grammar::mask_words(vocab_size)),
      worker_([this] { worker_loop(); }) {}

StructuredOutputs::~StructuredOutputs() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

Result<Grammar> StructuredOutputs::compile(const StructuredOutput& so) {
  if (so.kind == StructuredOutput::Kind::kNone) return Grammar{};
  auto text = structured_output_grammar(so);
  if (!text.ok()) return text.error();
  return cache_.get(text.value());
}

void StructuredOutputs::check_idle() const {
  TESSERA_CHECK(!job_started_, "structured outputs: the mask job is running (wait_masks first)");
}

void StructuredOutputs::add(int64_t request_id, const Grammar& grammar, int32_t num_samples) {
  check_idle();
  if (!grammar) return;
  RequestGrammar& r = requests_[request_id];
  r.grammar = grammar;
  grammar::GrammarMatcher root(grammar);
  r.samples.assign(static_cast<size_t>(num_samples), root);  // forks: each sample its own place
}

void StructuredOutputs::remove(int64_t request_id) {
  check_idle();
  requests_.erase(request_id);
}

grammar::GrammarMatcher* StructuredOutputs::matcher_of(int64_t request_id, int32_t sample_index) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return nullptr;
  return &it->second.samples[static_cast<size_t>(sample_index)];
}

void StructuredOutputs::start_masks(const sched::SchedulerOutput& out) {
  check_idle();
  jobs_.clear();
  spans_.assign(out.seqs.size(), {});
  if (requests_.empty()) return;
  size_t words = 0;
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (!s.needs_logits) continue;
    grammar::GrammarMatcher* m = matcher_of(s.request_id, s.sample_index);
    if (m == nullptr) continue;
    const auto k = static_cast<size_t>(s.num_spec_tokens);
    jobs_.push_back({m, std::span<const int32_t>(s.token_ids).subspan(s.token_ids.size() - k), words,
                     static_cast<size_t>(&s - out.seqs.data())});
    words += (k + 1) * words_;
  }
  if (jobs_.empty()) return;
  // Sized before the spans are taken and the job starts: nothing reallocates under the worker.
  if (masks_.size() < words) masks_.resize(words);
  for (const MaskJob& job : jobs_) {
    spans_[job.seq_index] = std::span<const uint64_t>(masks_.data() + job.offset, (job.drafts.size() + 1) * words_);
  }
  job_started_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  cv_.notify_all();
}

std::span<const std::span<const uint64_t>> StructuredOutputs::wait_masks() {
  if (job_started_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !pending_; });
    job_started_ = false;
  }
  return spans_;
}

// Row j's mask is the matcher's after drafts [0, j). A draft the grammar refuses ends the walk:
// that row's mask excludes it, so verification rejects it there, and the later rows (never
// sampled) repeat the last mask. A stop token ends the walk too: nothing is sampled after it.
// The matcher is then rolled back to the committed tokens.
void StructuredOutputs::compute_masks() {
  for (const MaskJob& job : jobs_) {
    grammar::GrammarMatcher& m = *job.matcher;
    const size_t rows = job.drafts.size() + 1;
    uint64_t* masks = masks_.data() + job.offset;
    int32_t advanced = 0;
    for (size_t r = 0; r < rows; ++r) {
      std::span<uint64_t> row(masks + r * words_, words_);
      if (r > 0 && advanced == static_cast<int32_t>(r) - 1 && !m.compiled().tokens->is_stop(job.drafts[r - 1]) &&
          m.accept_token(job.drafts[r - 1])) {
        ++advanced;
      }
      if (r == 0 || advanced == static_cast<int32_t>(r)) {
        m.fill_mask(row);
      } else {
        std::copy(masks + (r - 1) * words_, masks + r * words_, row.begin());
      }
    }
    m.rollback(advanced);
  }
}

void StructuredOutputs::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return pending_ || stop_; });
    if (stop_) return;
    lock.unlock();
    compute_masks();
    lock.lock();
    pending_ = false;
    cv_.notify_all();
  }
}

const std::vector<SequenceEnd>& StructuredOutputs::commit(std::span<const sched::RequestUpdate> updates) {
  check_idle();
  ends_.clear();
  if (requests_.empty()) return ends_;
  for (const sched::RequestUpdate& u : updates) {
    grammar::GrammarMatcher* m = matcher_of(u.request_id, u.sample_index);
    if (m == nullptr) continue;
    bool refused = false;
    for (int32_t token : u.new_token_ids) {
      if (!m->accept_token(token)) {
        refused = true;
        break;
      }
    }
    if (refused) {
      ends_.push_back({u.seq_id, u.request_id, u.sample_index, sched::RequestStatus::kFinishedError,
                       "internal error: a sampled token is outside the request's grammar"});
    } else if (m->is_complete()) {
      ends_.push_back({u.seq_id, u.request_id, u.sample_index, sched::RequestStatus::kFinishedStopped, ""});
    }
  }
  return ends_;
}

}  // namespace tessera::structured
