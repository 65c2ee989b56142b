// tessera's Jinja engine: the one interface to it. A chat template is untrusted input (it comes
// inside a downloaded file), so parsing and rendering are bounded by Limits and every failure is an
// Error whose message names the template line and column, never a crash.
//
// Semantics are Jinja2's as Hugging Face's apply_chat_template configures it: trim_blocks and
// lstrip_blocks on, loop controls (break/continue) on, `tojson` as json.dumps(ensure_ascii=False),
// globals raise_exception(msg) and strftime_now(format), no autoescape. Supported: for (with
// else, inline if filter and loop.*), if/elif/else, set (also ns.attr and block set), macro, call,
// filter, raw, generation; the filters, tests and str/dict methods listed in builtins.cpp.
// Unsupported constructs (include, extends, recursive loops) are parse errors.
//
//   auto t = jinja::Template::parse(source);            // Result<Template>
//   auto text = t->render(context);                     // Result<std::string>
//
// Internally the interpreter unwinds with a private exception type, which never leaves this module.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "jinja/value.h"
#include "util/status.h"

namespace tessera::jinja {

struct Node;

struct Limits {
  size_t max_output_bytes = size_t{8} << 20;  // the rendered text and every captured block
  int64_t max_steps = 2'000'000;              // loop iterations + macro calls + range() items
  size_t max_work_bytes = size_t{256} << 20;  // bytes of all strings built while rendering
  int max_call_depth = 64;                    // nested macro / caller() calls
  int max_nesting = 200;                      // nesting of expressions and blocks in the source
};

struct RenderOptions {
  std::time_t now = 0;  // what strftime_now formats (local time); 0: the current time
};

// A template error (render time) carries the position of the expression that failed and, when the
// template itself called raise_exception(msg), that message.
class Template {
 public:
  static Result<Template> parse(std::string_view source, const Limits& limits = {});

  // context: the template's variables (messages, tools, add_generation_prompt, ...).
  Result<std::string> render(const ValueDict& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> nodes_;
  Limits limits_;
};

}  // namespace tessera::jinja
