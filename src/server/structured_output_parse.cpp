#include "server/structured_output_parse.h"

namespace tessera::server {

std::optional<ApiError> parse_structured_output(const Fields& f, SamplingParams* params) {
  StructuredOutput so;
  int num_given = 0;
  if (const json* rf = f.get("response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      return bad("response_format", "'response_format' must be an object with a string 'type'");
    }
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      so.kind = StructuredOutput::Kind::kJsonObject;
      ++num_given;
    } else if (type == "json_schema") {
      const auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object()) {
        return bad("response_format", "response_format type 'json_schema' needs a 'json_schema' object");
      }
      const auto schema = js->find("schema");
      if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
        return bad("response_format", "'json_schema.schema' must be a JSON Schema object");
      }
      if (const auto strict = js->find("strict"); strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
        return bad("response_format", "'json_schema.strict' must be a boolean");
      }
      // strict or not, the schema is enforced in full (or refused): there is no best-effort mode.
      so.kind = StructuredOutput::Kind::kJsonSchema;
      so.text = schema->dump();
      ++num_given;
    } else if (type != "text") {
      return bad("response_format",
                 "response_format 'type' must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
    }
  }
  if (const json* v = f.get("regex")) {
    if (!v->is_string()) return Fields::type_error("regex", "a string", *v);
    so.kind = StructuredOutput::Kind::kRegex;
    so.text = v->get<std::string>();
    ++num_given;
  }
  if (const json* v = f.get("grammar")) {
    if (!v->is_string()) return Fields::type_error("grammar", "a string", *v);
    so.kind = StructuredOutput::Kind::kGrammar;
    so.text = v->get<std::string>();
    ++num_given;
  }
  if (const json* v = f.get("choice")) {
    if (!v->is_array() || v->empty()) return bad("choice", "'choice' must be a non-empty list of strings");
    for (const json& c : *v) {
      if (!c.is_string()) return bad("choice", "'choice' must be a non-empty list of strings");
      so.choices.push_back(c.get<std::string>());
    }
    so.kind = StructuredOutput::Kind::kChoice;
    ++num_given;
  }
  if (num_given > 1) {
    return bad("response_format",
               "give at most one of a JSON response_format, 'regex', 'grammar' and 'choice'");
  }
  if (const json* v = f.get("json_whitespace")) {
    if (!v->is_string() || (*v != "compact" && *v != "any")) {
      return bad("json_whitespace", "'json_whitespace' must be 'compact' or 'any'");
    }
    so.any_whitespace = *v == "any";
  }
  params->structured = std::move(so);
  return std::nullopt;
}

}  // namespace tessera::server
