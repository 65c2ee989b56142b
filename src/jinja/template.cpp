// Template: parse once, render many times (each render has its own interpreter and budgets).
#include "jinja/template.h"

#include "jinja/interpreter.h"
#include "jinja/parser.h"

namespace tessera::jinja {

Result<Template> Template::parse(std::string_view source, const Limits& limits) {
  auto nodes = parse_template(source, limits.max_nesting);
  if (!nodes.ok()) return nodes.error();
  Template t;
  t.nodes_ = std::make_shared<const NodeList>(std::move(nodes).value());
  t.limits_ = limits;
  return t;
}

Result<std::string> Template::render(const ValueDict& context, const RenderOptions& options) const {
  try {
    Interpreter interpreter(limits_, options, context);
    return interpreter.render(*nodes_);
  } catch (const TemplateError& e) {
    if (e.line > 0) {
      return make_error(ErrorCode::kInvalidArgument, "template line {} column {}: {}", e.line, e.column, e.what());
    }
    return make_error(ErrorCode::kInvalidArgument, "template: {}", e.what());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted, "template: out of memory while rendering");
  }
}

}  // namespace tessera::jinja
