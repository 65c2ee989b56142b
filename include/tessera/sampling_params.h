// SamplingParams: how one request picks its tokens and when it stops. Plain data, part of the
// public API (the server fills it from OpenAI fields). Defaults follow vLLM/OpenAI.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// Structured output: the generated text is constrained to a language (grammar-constrained
// decoding). The engine compiles it at submit(); a spec it cannot enforce (an unsupported JSON
// Schema keyword, an invalid regex or grammar) is refused there with kInvalidArgument naming the
// problem, never run unconstrained.
struct StructuredOutput {
  enum class Kind {
    kNone,        // unconstrained
    kJsonObject,  // any JSON object (response_format json_object)
    kJsonSchema,  // `text` is a JSON Schema (response_format json_schema)
    kRegex,       // `text` is a regular expression the whole output matches
    kGrammar,     // `text` is a grammar in tessera's GBNF-style syntax (see src/grammar/grammar.h)
    kChoice,      // the output is exactly one of `choices`
  };
  Kind kind = Kind::kNone;
  std::string text;
  std::vector<std::string> choices;
  bool any_whitespace = false;  // JSON kinds: allow [ \t\n\r]* between tokens (default: compact,
                                // one optional space after ',' and ':')
};

struct SamplingParams {
  int32_t n = 1;                       // samples per prompt (they share the prompt's KV blocks)
  float temperature = 1.0f;            // 0 = greedy (argmax)
  int32_t top_k = 0;                   // keep the k most likely tokens; 0 or -1 = all
  float top_p = 1.0f;                  // nucleus: smallest set with cumulative prob >= top_p
  float min_p = 0.0f;                  // drop tokens with prob < min_p * max prob
  float repetition_penalty = 1.0f;     // CTRL-style: logits of seen tokens /= (or *=) this
  float presence_penalty = 0.0f;       // OpenAI: subtract once per seen token
  float frequency_penalty = 0.0f;      // OpenAI: subtract per occurrence
  std::optional<uint64_t> seed;        // per-request RNG seed: same seed, same tokens
  int32_t max_tokens = 256;            // generated tokens at most
  int32_t min_tokens = 0;              // EOS / stop tokens are ignored before this many
  std::vector<std::string> stop;       // stop strings, matched on the detokenized text
  std::vector<int32_t> stop_token_ids; // extra stop tokens besides the model's EOS
  bool ignore_eos = false;             // keep going past EOS (benchmarks)
  std::optional<int32_t> logprobs;     // return this many top logprobs per token (0 = only the chosen)
  bool include_stop_str_in_output = false;
  StructuredOutput structured;         // constrained decoding (kNone: off)
};

}  // namespace tessera
