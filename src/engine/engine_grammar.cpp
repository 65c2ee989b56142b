// Structured outputs inside the engine: compile a request's grammar at submit (on the caller's
// thread, cached by text), compute each constrained row's token mask while the forward runs, and
// advance every sample's matcher by its committed tokens (stopping it when the grammar is
// complete).
#include <algorithm>

#include "engine/engine_impl.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_grammar.h"

namespace tessera {

grammar::TokenVocabulary grammar_vocabulary(const tokenizer::Tokenizer& tok) {
  grammar::TokenVocabulary v;
  v.bytes.resize(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    // Control and user-defined tokens have no bytes the grammar could match: never allowed.
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

Status EngineImpl::attach_grammar(ActiveRequest& req) {
  const StructuredOutput& so = req.params.structured;
  if (so.kind == StructuredOutput::Kind::kNone) return ok_status();
  auto text = structured_output_grammar(so);
  if (!text.ok()) return text.error();
  auto compiled = grammar_cache_->get(text.value());
  if (!compiled.ok()) return compiled.error();
  req.grammar = compiled.value();
  grammar::GrammarMatcher root(req.grammar);
  for (SampleState& s : req.samples) s.grammar.emplace(root.fork());
  return ok_status();
}

void EngineImpl::start_grammar_masks(const sched::SchedulerOutput& out) {
  grammar_jobs_.clear();
  const size_t words = grammar::mask_words(info_.vocab_size);
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (!s.needs_logits) continue;
    auto it = requests_.find(s.request_id);
    if (it == requests_.end() || !it->second->grammar) continue;
    SampleState& sample = it->second->samples[static_cast<size_t>(s.sample_index)];
    if (!sample.grammar) continue;
    const auto k = static_cast<size_t>(s.num_spec_tokens);
    // Sized here, before the job starts: the step's sampling views point into it (grammar_masks_of).
    sample.grammar_masks.resize((k + 1) * words);
    grammar_jobs_.push_back({&sample, std::span<const int32_t>(s.token_ids).subspan(s.token_ids.size() - k)});
  }
  if (grammar_jobs_.empty()) return;
  // Row j's mask is the matcher's after drafts[0, j). A draft the grammar refuses ends the
  // walk: that row's mask excludes it, so verification rejects it there, and the later rows
  // (never sampled) repeat the last mask. The matcher is rolled back to the committed tokens.
  auto job = [this, words] {
    for (const GrammarJob& j : grammar_jobs_) {
      grammar::GrammarMatcher& m = *j.sample->grammar;
      const size_t rows = j.drafts.size() + 1;
      uint64_t* masks = j.sample->grammar_masks.data();
      int32_t advanced = 0;
      for (size_t r = 0; r < rows; ++r) {
        std::span<uint64_t> row(masks + r * words, words);
        // A stop token ends the walk too: nothing is sampled after it.
        if (r > 0 && advanced == static_cast<int32_t>(r) - 1 &&
            !m.compiled().tokens->is_stop(j.drafts[r - 1]) && m.accept_token(j.drafts[r - 1])) {
          ++advanced;
        }
        if (r == 0 || advanced == static_cast<int32_t>(r)) {
          m.fill_mask(row);
        } else {
          std::copy(masks + (r - 1) * words, masks + r * words, row.begin());
        }
      }
      m.rollback(advanced);
    }
  };
  grammar_future_ = std::async(std::launch::async, job);
}

void EngineImpl::wait_grammar_masks() {
  if (grammar_future_.valid()) grammar_future_.get();
}

std::span<const uint64_t> EngineImpl::grammar_masks_of(const sched::ScheduledSeq& s) const {
  auto it = requests_.find(s.request_id);
  if (it == requests_.end() || !it->second->grammar) return {};
  // A view of the buffer the mask job fills (sized in start_grammar_masks): the runner waits for
  // the job (execute's sampling_ready) after the forward, before it reads the masks.
  return it->second->samples[static_cast<size_t>(s.sample_index)].grammar_masks;
}

}  // namespace tessera
