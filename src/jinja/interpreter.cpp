// Statements and scopes of the interpreter (expressions: interpreter_expr.cpp).
#include "jinja/interpreter.h"

#include <fmt/format.h>

namespace tessera::jinja {

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(const Limits& limits, const RenderOptions& options, const ValueDict& context)
    : limits_(limits), now_(options.now != 0 ? options.now : std::time(nullptr)) {
  auto globals = std::make_shared<Frame>();
  add_globals(*this, *globals);
  for (const auto& [k, v] : context.items) globals->vars[k] = v;
  frame_ = std::make_shared<Frame>();
  frame_->parent = globals;
}

Interpreter::~Interpreter() {
  for (Value& ns : namespaces_) ns.as_dict().items.clear();
}

void Interpreter::charge_steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    throw TemplateError(fmt::format("template ran past its limit of {} loop iterations and calls", limits_.max_steps));
  }
}

void Interpreter::charge_work(size_t bytes) {
  work_ += bytes;
  if (work_ > limits_.max_work_bytes || bytes > limits_.max_output_bytes) {
    throw TemplateError(fmt::format("template built more than its limit of {} bytes of text", limits_.max_work_bytes));
  }
}

void Interpreter::emit(const std::string& text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    throw TemplateError(fmt::format("template output exceeds its limit of {} bytes", limits_.max_output_bytes));
  }
  *out_ += text;
}

std::string Interpreter::render(const NodeList& nodes) {
  std::string out;
  out_ = &out;
  const Flow flow = exec_list(nodes);
  if (flow != Flow::kNormal) throw TemplateError("'break' or 'continue' outside of a loop");
  return out;
}

std::string Interpreter::capture(const NodeList& nodes, std::shared_ptr<Frame> frame) {
  std::string buffer;
  std::string* saved_out = out_;
  std::shared_ptr<Frame> saved_frame = frame_;
  out_ = &buffer;
  frame_ = std::move(frame);
  try {
    exec_list(nodes);
  } catch (...) {
    out_ = saved_out;
    frame_ = saved_frame;
    throw;
  }
  out_ = saved_out;
  frame_ = saved_frame;
  return buffer;
}

Interpreter::Flow Interpreter::exec_list(const NodeList& nodes) {
  for (const NodePtr& n : nodes) {
    const Flow flow = exec(*n);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& node) {
  try {
    switch (node.kind) {
      case Node::Kind::kText: emit(node.text); break;
      case Node::Kind::kOutput: {
        std::string text = to_display(eval(*node.expr));
        emit(text);
        break;
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : node.branches) {
          if (cond == nullptr || eval(*cond).truthy()) return exec_list(body);
        }
        break;
      case Node::Kind::kFor: exec_for(node); break;
      case Node::Kind::kSet: exec_set(node); break;
      case Node::Kind::kSetBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        Value text = Value::string(capture(node.body, inner));
        if (node.filter) {
          // The filter chain has a null subject at its innermost filter: feed the body there.
          std::vector<const Expr*> chain;
          for (const Expr* f = node.filter.get(); f != nullptr; f = f->args[0].get()) chain.push_back(f);
          for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            CallArgs args = eval_args(**it, 1);
            text = filter((*it)->name, text, args);
          }
        }
        frame_->vars[node.targets[0]] = text;
        break;
      }
      case Node::Kind::kMacro: define_macro(node); break;
      case Node::Kind::kCallBlock: {
        const Node* body_node = &node;
        std::weak_ptr<Frame> defining = frame_;  // weak: a closure must not own its scope (cycle)
        Value caller = Value::function("caller", [this, body_node, defining](CallArgs& args) {
          auto inner = std::make_shared<Frame>();
          inner->parent = defining.lock();
          if (!inner->parent) throw TemplateError("caller() used outside the scope it was defined in");
          for (size_t i = 0; i < body_node->params.size(); ++i) {
            inner->vars[body_node->params[i].first] = i < args.positional.size() ? args.positional[i] : Value();
          }
          if (++call_depth_ > limits_.max_call_depth) throw TemplateError("template calls nested too deeply");
          charge_steps(1);
          std::string text = capture(body_node->body, inner);
          --call_depth_;
          return Value::string(std::move(text));
        });
        const Expr& call_expr = *node.expr;
        Value fn = eval(*call_expr.args[0]);
        CallArgs args = eval_args(call_expr, 1);
        args.keyword.emplace_back("caller", caller);
        emit(to_display(call(fn, args)));
        break;
      }
      case Node::Kind::kFilterBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        Value text = Value::string(capture(node.body, inner));
        std::vector<const Expr*> chain;
        for (const Expr* f = node.expr.get(); f != nullptr; f = f->args[0].get()) chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs args = eval_args(**it, 1);
          text = filter((*it)->name, text, args);
        }
        emit(to_display(text));
        break;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kScope: return exec_list(node.body);
    }
  } catch (TemplateError& e) {
    if (e.line == 0) throw TemplateError(e.what(), node.line, node.column);
    throw;
  }
  return Flow::kNormal;
}

void Interpreter::bind(const std::vector<std::string>& targets, const Value& value, Frame& frame) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return;
  }
  ValueList items = iterate(value);
  if (!value.is_list() && !value.is_string() && !value.is_dict()) {
    throw TemplateError(fmt::format("cannot unpack a {} into {} names", value.type_name(), targets.size()));
  }
  if (items.size() != targets.size()) {
    throw TemplateError(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
  }
  for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
}

void Interpreter::exec_for(const Node& node) {
  Value iterable = eval(*node.expr);
  if (!iterable.is_undefined() && !iterable.is_list() && !iterable.is_dict() && !iterable.is_string()) {
    throw TemplateError(fmt::format("'{}' object is not iterable", iterable.type_name()));
  }
  ValueList items = iterate(iterable);
  if (node.filter) {
    ValueList kept;
    for (const Value& item : items) {
      charge_steps(1);
      auto probe = std::make_shared<Frame>();
      probe->parent = frame_;
      bind(node.targets, item, *probe);
      std::shared_ptr<Frame> saved = frame_;
      frame_ = probe;
      const bool keep = eval(*node.filter).truthy();
      frame_ = saved;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_list(node.else_body);
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  Value cycle_items;  // loop.cycle needs the current index: rebuilt per iteration
  std::shared_ptr<Frame> saved = frame_;
  for (int64_t i = 0; i < n; ++i) {
    charge_steps(1);
    auto iteration = std::make_shared<Frame>();
    iteration->parent = saved;
    ValueDict loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(n - i));
    loop.set("revindex0", Value::integer(n - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("previtem"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("nextitem"));
    loop.set("cycle", Value::function("cycle", [i](CallArgs& args) {
               if (args.positional.empty()) throw TemplateError("no items for cycling given");
               return args.positional[static_cast<size_t>(i) % args.positional.size()];
             }));
    iteration->vars["loop"] = Value::dict(std::move(loop));
    bind(node.targets, items[i], *iteration);
    frame_ = iteration;
    Flow flow;
    try {
      flow = exec_list(node.body);
    } catch (...) {
      frame_ = saved;
      throw;
    }
    frame_ = saved;
    if (flow == Flow::kBreak) break;
  }
}

void Interpreter::exec_set(const Node& node) {
  Value value = eval(*node.expr);
  if (node.attr.empty()) {
    bind(node.targets, value, *frame_);
    return;
  }
  const Value* ns = frame_->find(node.targets[0]);
  if (ns == nullptr || !ns->is_namespace()) {
    throw TemplateError(fmt::format("cannot assign attribute on non-namespace object '{}'", node.targets[0]));
  }
  ns->as_dict().set(node.attr, std::move(value));
}

void Interpreter::define_macro(const Node& node) {
  const Node* macro = &node;
  std::weak_ptr<Frame> defining = frame_;  // weak: the macro is stored in this frame (cycle)
  frame_->vars[node.text] = Value::function(node.text, [this, macro, defining](CallArgs& args) {
    if (args.positional.size() > macro->params.size()) {
      throw TemplateError(fmt::format("macro '{}' takes not more than {} argument(s)", macro->text, macro->params.size()));
    }
    if (++call_depth_ > limits_.max_call_depth) throw TemplateError("template calls nested too deeply");
    charge_steps(1);
    auto inner = std::make_shared<Frame>();
    inner->parent = defining.lock();
    if (!inner->parent) {
      --call_depth_;
      throw TemplateError(fmt::format("macro '{}' called outside the scope it was defined in", macro->text));
    }
    std::shared_ptr<Frame> saved = frame_;
    frame_ = inner;
    try {
      for (size_t i = 0; i < macro->params.size(); ++i) {
        const auto& [name, def] = macro->params[i];
        Value value;
        bool given = false;
        if (i < args.positional.size()) {
          value = args.positional[i];
          given = true;
        }
        for (const auto& [k, v] : args.keyword) {
          if (k == name) {
            value = v;
            given = true;
          }
        }
        if (!given && def) value = eval(*def);
        if (!given && !def) value = Value::undefined(name);
        inner->vars[name] = value;
      }
      for (const auto& [k, v] : args.keyword) {
        if (k == "caller") {
          inner->vars["caller"] = v;
          continue;
        }
        bool known = false;
        for (const auto& p : macro->params) known = known || p.first == k;
        if (!known) throw TemplateError(fmt::format("macro '{}' takes no keyword argument '{}'", macro->text, k));
      }
    } catch (...) {
      frame_ = saved;
      --call_depth_;
      throw;
    }
    frame_ = saved;
    std::string text;
    try {
      text = capture(macro->body, inner);
    } catch (...) {
      --call_depth_;
      throw;
    }
    --call_depth_;
    return Value::string(std::move(text));
  });
}

}  // namespace tessera::jinja
