// JSON Schema (and json_object, choice) -> grammar text.
//
// Every output the grammar admits validates against the schema; where the schema allows more
// than the grammar (additional properties beside declared ones, properties in another order,
// oneOf taken as anyOf), the grammar picks the subset. What cannot be enforced is an error
// naming the keyword (the server's 400): unknown keywords, `not`, `if`, `uniqueItems`,
// `patternProperties`, `multipleOf`, exclusive bounds on non-integers, ...
//
// Supported: type (one or a list), properties / required / additionalProperties (false, true,
// or a schema when there are no properties: a map), enum, const, anyOf, oneOf, allOf of one
// schema, $ref to "#", "#/$defs/..." and "#/definitions/..." (recursion included), items,
// prefixItems, minItems / maxItems, string minLength / maxLength, pattern (regex_to_grammar.h),
// format (date, time, date-time, uuid, email, ipv4, hostname, uri), integer minimum / maximum /
// exclusiveMinimum / exclusiveMaximum, number minimum / maximum at integer values, nullable.
// Annotations (title, description, default, examples, $schema, $id, $comment, ...) are ignored.
// Properties appear in the order the schema lists them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tessera::grammar {

enum class JsonWhitespace {
  kCompact,  // no whitespace, except one optional space after ',' and ':'
  kAny,      // [ \t\n\r]* wherever JSON allows whitespace (as XGrammar's any_whitespace)
};

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
};

Result<std::string> json_schema_to_grammar(std::string_view schema_json,
                                           const JsonSchemaOptions& options = {});
// Any JSON object (response_format json_object).
std::string json_object_grammar(const JsonSchemaOptions& options = {});
// Exactly one of the strings (the `choice` request field). Empty list: error.
Result<std::string> choice_to_grammar(const std::vector<std::string>& choices);

}  // namespace tessera::grammar
