// Structured-output fields of a generate request -> SamplingParams::structured:
//   response_format {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
//     "schema", "strict", "description"}}    (chat and completions)
//   tessera's own: "regex" (string), "grammar" (string, GBNF-style), "choice" (list of strings),
//   "json_whitespace" ("compact" default | "any")
// At most one constraint per request. Only the shape is checked here; the engine compiles the
// schema / regex / grammar at submit and refuses what it cannot enforce (400 naming it).
#pragma once
#include <optional>

#include "server/json_fields.h"
#include "tessera/sampling_params.h"

namespace tessera::server {

// The request fields this parser reads (for the unknown-field checks).
inline constexpr const char* kStructuredOutputFields[] = {"response_format", "regex", "grammar",
                                                          "choice", "json_whitespace"};

std::optional<ApiError> parse_structured_output(const Fields& f, SamplingParams* params);

}  // namespace tessera::server
