#include "engine/text/jinja/interpreter.h"

#include <cmath>
#include <iterator>
#include <memory>
#include <optional>
#include <unordered_map>

#include "engine/text/jinja/builtins.h"
#include "engine/text/jinja/python_format.h"
#include "engine/text/jinja/python_string.h"

namespace sy::text::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

struct MacroDef {
  const Node* node = nullptr;
  std::shared_ptr<Scope> closure;
};

namespace {

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

class Interpreter final : public Callbacks {
 public:
  Interpreter(const Template& t, const RenderLimits& limits) : tmpl_(t), limits_(limits) {}
  // A macro holds the scope it was defined in, and that scope holds the macro: the cycle is
  // broken here, once nothing of the render can call a macro any more (found by
  // fuzz_chat_template: every template with a macro leaked its scopes).
  ~Interpreter() override {
    for (const auto& scope : macro_scopes_) scope->vars.clear();
  }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  StatusOr<std::string> run(const Value& context) {
    if (!context.is_dict()) return Status::Error(tmpl_.origin + ": the render context must be a dict");
    auto root = std::make_shared<Scope>();
    for (const auto& [k, v] : context.as_dict())
      if (k.is_string()) root->vars[k.as_string()] = v;
    std::string out;
    Status s = exec_body(tmpl_.body, root, out);
    if (!s.ok()) return s;
    return out;
  }

  // map's filter runs once per item, outside eval: each result is bounded and counted here.
  StatusOr<Value> call_filter(const std::string& name, const Value& operand, const Args& args) override {
    auto r = apply_filter(name, operand, args, *this);
    if (r.ok()) SY_RETURN_IF_ERROR(bound(*r, true));
    return r;
  }
  StatusOr<bool> call_test(const std::string& name, const Value& operand, const Args& args) override {
    return apply_test(name, operand, args, *this);
  }
  std::size_t value_limit() const override { return limits_.max_output_bytes; }
  Status charge(std::size_t bytes) override {
    value_bytes_ += bytes;
    if (value_bytes_ > limits_.max_value_bytes)
      return Status::Error("template exceeded its budget of " + std::to_string(limits_.max_value_bytes) +
                           " bytes of values computed and text written");
    return Status::Ok();
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Statements and expressions being evaluated at once (macros recurse through both): bounds the
  // native stack whatever mix of nesting and recursion a template uses.
  static constexpr int kMaxNest = 1000;
  struct Nest {
    explicit Nest(Interpreter& i) : in(i) { ++in.nest_; }
    ~Nest() { --in.nest_; }
    Interpreter& in;
  };

  Status fail(int line, int col, const std::string& message) const {
    return Status::Error(tmpl_.origin + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + message);
  }
  template <class T>
  Status fail(const T& at, const std::string& message) const {
    return fail(at.line, at.col, message);
  }
  // Errors from builtins carry no location yet; put the node's in front.
  template <class T>
  Status locate(const T& at, const Status& s) const {
    return fail(at, s.message());
  }

  Status step(const Node& at) {
    if (++steps_ > limits_.max_steps)
      return fail(at, "template exceeded its budget of " + std::to_string(limits_.max_steps) + " steps");
    return Status::Ok();
  }

  Status append(const Node& at, std::string& out, std::string_view s) {
    if (out.size() + s.size() > limits_.max_output_bytes)
      return fail(at, "rendered text exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
    // Block sets capture into buffers of their own, which the output limit does not see.
    if (Status c = charge(s.size()); !c.ok()) return locate(at, c);
    out += s;
    return Status::Ok();
  }

  // Every value computed is bounded, so that doubling a string or a list in a loop stops at the
  // output limit instead of exhausting memory; `counted` values are charged to the budget too.
  Status bound(const Value& v, bool counted) {
    if (v.is_string() && v.as_string().size() > limits_.max_output_bytes)
      return Status::Error("a string value exceeds the limit of " + std::to_string(limits_.max_output_bytes) +
                           " bytes");
    if (v.is_list() && v.as_list().size() > max_items())
      return Status::Error("a list value exceeds " + std::to_string(max_items()) + " items");
    if (!counted) return Status::Ok();
    return charge(v.is_string() ? v.as_string().size() : v.is_list() ? kListItemBytes * v.as_list().size() : 0);
  }

  // ---- statements ----

  Status exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
    for (const auto& n : body) {
      SY_RETURN_IF_ERROR(exec(*n, scope, out));
      if (flow_ != Flow::kNormal) return Status::Ok();
    }
    return Status::Ok();
  }

  Status exec(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out) {
    Nest nest(*this);
    if (nest_ > kMaxNest) return fail(n, "template evaluation nested more than " + std::to_string(kMaxNest) + " deep");
    SY_RETURN_IF_ERROR(step(n));
    switch (n.kind) {
      case Node::Kind::kText: return append(n, out, n.text);
      case Node::Kind::kOutput: {
        auto v = eval(*n.expr, scope);
        if (!v.ok()) return v.status();
        if (v->is_string()) return append(n, out, v->as_string());
        auto text = py_str(*v, limits_.max_output_bytes);
        if (!text.ok()) return locate(n, text.status());
        return append(n, out, *text);
      }
      case Node::Kind::kIf: {
        for (const auto& [cond, body] : n.branches) {
          auto c = eval(*cond, scope);
          if (!c.ok()) return c.status();
          if (c->truthy()) return exec_body(body, scope, out);
        }
        return exec_body(n.else_body, scope, out);
      }
      case Node::Kind::kFor: return exec_for(n, scope, out);
      case Node::Kind::kSet: {
        auto v = eval(*n.expr, scope);
        if (!v.ok()) return v.status();
        if (!n.attr.empty()) {
          const Value* ns = lookup(n.targets[0], *scope);
          if (!ns || !ns->is_namespace()) return fail(n, "cannot assign attribute on non-namespace object");
          auto& attrs = ns->namespace_attrs();
          for (auto& [k, x] : attrs)
            if (k.is_string() && k.as_string() == n.attr) {
              x = *v;
              return Status::Ok();
            }
          attrs.emplace_back(Value::string(n.attr), *v);
          return Status::Ok();
        }
        return assign(n, n.targets, *v, *scope);
      }
      case Node::Kind::kSetBlock: {
        std::string text;
        SY_RETURN_IF_ERROR(exec_body(n.body, scope, text));
        Value v = Value::string(std::move(text));
        if (n.expr) {
          auto f = apply_block_filters(*n.expr, v, scope);
          if (!f.ok()) return f.status();
          v = *f;
        }
        scope->vars[n.targets[0]] = v;
        return Status::Ok();
      }
      case Node::Kind::kMacro: {
        auto def = std::make_shared<MacroDef>();
        def->node = &n;
        def->closure = scope;
        macro_scopes_.push_back(scope);
        scope->vars[n.targets[0]] = Value::macro(std::move(def));
        return Status::Ok();
      }
      case Node::Kind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
      case Node::Kind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
    }
    return Status::Ok();
  }

  Status assign(const Node& at, const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return Status::Ok();
    }
    auto items = to_list(v, *this);
    if (!items.ok()) return locate(at, items.status());
    if (items->size() != targets.size())
      return fail(at, items->size() > targets.size()
                          ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                          : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                std::to_string(items->size()) + ")");
    for (std::size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = (*items)[i];
    return Status::Ok();
  }

  Status exec_for(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out) {
    auto iterable = eval(*n.expr, scope);
    if (!iterable.ok()) return iterable.status();
    auto all = to_list(*iterable, *this);
    if (!all.ok()) return locate(*n.expr, all.status());
    List items;
    if (n.filter) {
      for (const auto& item : *all) {
        SY_RETURN_IF_ERROR(step(n));
        auto probe = std::make_shared<Scope>();
        probe->parent = scope;
        SY_RETURN_IF_ERROR(assign(n, n.targets, item, *probe));
        auto keep = eval(*n.filter, probe);
        if (!keep.ok()) return keep.status();
        if (keep->truthy()) items.push_back(item);
      }
    } else {
      items = std::move(*all);
    }
    const auto length = static_cast<std::int64_t>(items.size());
    bool completed = false;
    for (std::int64_t i = 0; i < length; ++i) {
      SY_RETURN_IF_ERROR(step(n));
      auto iter_scope = std::make_shared<Scope>();
      iter_scope->parent = scope;
      const auto idx = static_cast<std::size_t>(i);
      static const Value kKeys[] = {Value::string("index"),    Value::string("index0"), Value::string("revindex"),
                                    Value::string("revindex0"), Value::string("first"),  Value::string("last"),
                                    Value::string("length"),    Value::string("depth"),  Value::string("depth0"),
                                    Value::string("previtem"),  Value::string("nextitem"), Value::string("cycle"),
                                    Value::string("changed")};
      // Markers that eval_call recognises: cycle needs this loop's index0, which it reads here.
      static const Value kCycle = Value::function("loop.cycle");
      static const Value kChanged = Value::function("loop.changed");
      static const Value kNoPrev = Value::undefined("there is no previous item");
      static const Value kNoNext = Value::undefined("there is no next item");
      Dict loop;
      loop.reserve(std::size(kKeys));
      const Value values[] = {Value::integer(i + 1),          Value::integer(i),
                              Value::integer(length - i),     Value::integer(length - i - 1),
                              Value::boolean(i == 0),         Value::boolean(i == length - 1),
                              Value::integer(length),         Value::integer(1),
                              Value::integer(0),              i > 0 ? items[idx - 1] : kNoPrev,
                              i + 1 < length ? items[idx + 1] : kNoNext,
                              kCycle,                         kChanged};
      static_assert(sizeof kKeys / sizeof kKeys[0] == sizeof values / sizeof values[0]);
      for (std::size_t k = 0; k < std::size(kKeys); ++k) loop.emplace_back(kKeys[k], values[k]);
      iter_scope->vars["loop"] = Value::dict(std::move(loop));
      SY_RETURN_IF_ERROR(assign(n, n.targets, items[idx], *iter_scope));
      SY_RETURN_IF_ERROR(exec_body(n.body, iter_scope, out));
      const Flow flow = flow_;
      flow_ = Flow::kNormal;
      if (flow == Flow::kBreak) break;
      if (flow == Flow::kNormal) completed = true;
    }
    // jinja2 clears its "no iteration" flag at the end of the loop body, which break and
    // continue skip: the else block runs unless some iteration ran to the end.
    if (completed) return Status::Ok();
    // The else block is a scope of its own too: what it sets does not leak out.
    auto else_scope = std::make_shared<Scope>();
    else_scope->parent = scope;
    return exec_body(n.else_body, else_scope, out);
  }

  // ---- expressions ----

  static const Value* lookup(const std::string& name, const Scope& scope) {
    for (const Scope* s = &scope; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }

  Status undefined_error(const Expr& at, const Value& v) const {
    return fail(at, v.undefined_hint().empty() ? "undefined value" : v.undefined_hint());
  }

  StatusOr<Value> eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
    Nest nest(*this);
    if (nest_ > kMaxNest) return fail(e, "template evaluation nested more than " + std::to_string(kMaxNest) + " deep");
    auto v = eval_unbounded(e, scope);
    if (!v.ok()) return v;
    // References are charged too, not only new values: comparing, searching or indexing a
    // string scans it, and each such use reads the value through here.
    if (Status b = bound(*v, e.kind != Expr::Kind::kLiteral); !b.ok()) return locate(e, b);
    return v;
  }

  StatusOr<Value> eval_unbounded(const Expr& e, const std::shared_ptr<Scope>& scope) {
    if (++steps_ > limits_.max_steps)
      return fail(e, "template exceeded its budget of " + std::to_string(limits_.max_steps) + " steps");
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: {
        if (const Value* v = lookup(e.name, *scope)) return *v;
        if (is_global_function(e.name)) return Value::function(e.name);
        return Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const auto& c : e.children) {
          auto v = eval(*c, scope);
          if (!v.ok()) return v;
          items.push_back(std::move(*v));
        }
        return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Dict items;
        for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
          auto k = eval(*e.children[i], scope);
          if (!k.ok()) return k;
          auto v = eval(*e.children[i + 1], scope);
          if (!v.ok()) return v;
          bool replaced = false;
          for (auto& [ek, ev] : items)
            if (equals(ek, *k)) {
              ev = *v;
              replaced = true;
            }
          if (!replaced) items.emplace_back(std::move(*k), std::move(*v));
        }
        return Value::dict(std::move(items));
      }
      case Expr::Kind::kGetAttr: {
        auto obj = eval(*e.children[0], scope);
        if (!obj.ok()) return obj;
        return get_attr(e, *obj, e.name);
      }
      case Expr::Kind::kGetItem: {
        auto obj = eval(*e.children[0], scope);
        if (!obj.ok()) return obj;
        auto idx = eval(*e.children[1], scope);
        if (!idx.ok()) return idx;
        return get_item(e, *obj, *idx);
      }
      case Expr::Kind::kSlice: return eval_slice(e, scope);
      case Expr::Kind::kCall: return eval_call(e, scope);
      case Expr::Kind::kFilter: {
        auto operand = eval(*e.children[0], scope);
        if (!operand.ok()) return operand;
        return apply_one_filter(e, *operand, scope);
      }
      case Expr::Kind::kTest: {
        auto operand = eval(*e.children[0], scope);
        if (!operand.ok()) return operand;
        auto args = eval_args(e, scope);
        if (!args.ok()) return args.status();
        auto r = apply_test(e.name, *operand, *args, *this);
        if (!r.ok()) return locate(e, r.status());
        return Value::boolean(*r != e.negated);
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        auto v = eval(*e.children[0], scope);
        if (!v.ok()) return v;
        if (v->is_undefined()) return undefined_error(e, *v);
        if (!v->is_number())
          return fail(e, std::string("bad operand type for unary ") + (e.kind == Expr::Kind::kNeg ? "-" : "+") +
                             ": '" + v->type_name() + "'");
        if (e.kind == Expr::Kind::kPos) return v->is_bool() ? Value::integer(v->as_int()) : *v;
        if (v->is_float()) return Value::floating(-v->as_float());
        if (v->as_int() == INT64_MIN) return fail(e, "integer overflow");
        return Value::integer(-v->as_int());
      }
      case Expr::Kind::kNot: {
        auto v = eval(*e.children[0], scope);
        if (!v.ok()) return v;
        return Value::boolean(!v->truthy());
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        auto l = eval(*e.children[0], scope);
        if (!l.ok()) return l;
        if ((e.kind == Expr::Kind::kAnd) != l->truthy()) return l;
        return eval(*e.children[1], scope);
      }
      case Expr::Kind::kBinary: {
        auto l = eval(*e.children[0], scope);
        if (!l.ok()) return l;
        auto r = eval(*e.children[1], scope);
        if (!r.ok()) return r;
        return binary(e, e.name, *l, *r);
      }
      case Expr::Kind::kCompare: {
        auto l = eval(*e.children[0], scope);
        if (!l.ok()) return l;
        Value left = *l;
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          auto r = eval(*e.children[i + 1], scope);
          if (!r.ok()) return r;
          auto c = compare(e, e.ops[i], left, *r);
          if (!c.ok()) return c.status();
          if (!*c) return Value::boolean(false);
          left = *r;
        }
        return Value::boolean(true);
      }
      case Expr::Kind::kCondExpr: {
        auto c = eval(*e.children[0], scope);
        if (!c.ok()) return c;
        if (c->truthy()) return eval(*e.children[1], scope);
        if (e.children[2]) return eval(*e.children[2], scope);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
      }
    }
    return fail(e, "unknown expression");
  }

  StatusOr<Value> get_attr(const Expr& at, const Value& obj, const std::string& name) {
    if (obj.is_undefined()) return undefined_error(at, obj);
    if (obj.is_dict() || obj.is_namespace()) {
      if (const Value* v = obj.find(name)) return *v;
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
  }

  StatusOr<Value> get_item(const Expr& at, const Value& obj, const Value& idx) {
    if (obj.is_undefined()) return undefined_error(at, obj);
    if (obj.is_dict()) {
      if (const Value* v = obj.find(idx)) return *v;
    } else if ((obj.is_list() || obj.is_string()) && (idx.is_int() || idx.is_bool())) {
      const bool is_str = obj.is_string();
      std::u32string chars;
      if (is_str) chars = utf8_decode(obj.as_string());
      const auto n = static_cast<std::int64_t>(is_str ? chars.size() : obj.as_list().size());
      std::int64_t i = idx.as_int();
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        if (!is_str) return obj.as_list()[static_cast<std::size_t>(i)];
        std::string s;
        utf8_append(s, chars[static_cast<std::size_t>(i)]);
        return Value::string(std::move(s));
      }
      return Value::undefined(object_type_repr(obj) + " has no element " + repr_for_message(idx));
    } else if (obj.is_namespace() && idx.is_string()) {
      if (const Value* v = obj.find(idx)) return *v;
    }
    if (idx.is_string()) return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + idx.as_string() + "'");
    return Value::undefined(object_type_repr(obj) + " has no element " + repr_for_message(idx));
  }

  StatusOr<Value> eval_slice(const Expr& e, const std::shared_ptr<Scope>& scope) {
    auto obj = eval(*e.children[0], scope);
    if (!obj.ok()) return obj;
    std::optional<std::int64_t> bounds[3];
    for (int k = 0; k < 3; ++k) {
      const auto& c = e.children[static_cast<std::size_t>(k) + 1];
      if (!c) continue;
      auto v = eval(*c, scope);
      if (!v.ok()) return v;
      if (v->is_none()) continue;
      if (!v->is_int() && !v->is_bool())
        return fail(e, "slice indices must be integers or None, not " + v->type_name());
      bounds[k] = v->as_int();
    }
    if (obj->is_undefined()) return undefined_error(e, *obj);
    // jinja2 compiles a slice to a plain Python subscript, so other types raise (only a slice of
    // a literal, which jinja2 folds while compiling, renders as undefined there).
    if (obj->is_dict()) return fail(e, "unhashable type: 'slice'");
    if (!obj->is_list() && !obj->is_string()) return fail(e, "'" + obj->type_name() + "' object is not subscriptable");
    const std::int64_t step = bounds[2].value_or(1);
    if (step == 0) return fail(e, "slice step cannot be zero");
    const bool is_str = obj->is_string();
    std::u32string chars;
    if (is_str) chars = utf8_decode(obj->as_string());
    const auto n = static_cast<std::int64_t>(is_str ? chars.size() : obj->as_list().size());
    // CPython's PySlice_AdjustIndices.
    auto adjust = [&](std::optional<std::int64_t> b, std::int64_t def) {
      if (!b) return def;
      std::int64_t x = *b;
      if (x < 0) {
        x += n;
        if (x < 0) x = step < 0 ? -1 : 0;
      } else if (x >= n) {
        x = step < 0 ? n - 1 : n;
      }
      return x;
    };
    const std::int64_t start = adjust(bounds[0], step < 0 ? n - 1 : 0);
    const std::int64_t stop = adjust(bounds[1], step < 0 ? -1 : n);
    List items;
    std::u32string out_chars;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (is_str) out_chars.push_back(chars[static_cast<std::size_t>(i)]);
      else items.push_back(obj->as_list()[static_cast<std::size_t>(i)]);
    }
    if (is_str) return Value::string(utf8_encode(out_chars));
    return Value::list(std::move(items), obj->is_tuple());
  }

  StatusOr<Args> eval_args(const Expr& e, const std::shared_ptr<Scope>& scope) {
    Args args;
    for (std::size_t i = 1; i < e.children.size(); ++i) {
      auto v = eval(*e.children[i], scope);
      if (!v.ok()) return v.status();
      args.positional.push_back(std::move(*v));
    }
    for (const auto& [k, x] : e.kwargs) {
      auto v = eval(*x, scope);
      if (!v.ok()) return v.status();
      args.keyword.emplace_back(k, std::move(*v));
    }
    return args;
  }

  // One filter applied to an evaluated operand.
  StatusOr<Value> apply_one_filter(const Expr& e, const Value& operand, const std::shared_ptr<Scope>& scope) {
    auto args = eval_args(e, scope);
    if (!args.ok()) return args.status();
    auto r = apply_filter(e.name, operand, *args, *this);
    if (!r.ok()) return locate(e, r.status());
    return r;
  }

  // The filters of {% set x | f | g %}: a chain whose innermost operand is null.
  StatusOr<Value> apply_block_filters(const Expr& e, const Value& text, const std::shared_ptr<Scope>& scope) {
    Value v = text;
    if (e.children[0]) {
      auto inner = apply_block_filters(*e.children[0], text, scope);
      if (!inner.ok()) return inner;
      v = *inner;
    }
    return apply_one_filter(e, v, scope);
  }

  StatusOr<Value> eval_call(const Expr& e, const std::shared_ptr<Scope>& scope) {
    const Expr& callee = *e.children[0];
    if (callee.kind == Expr::Kind::kGetAttr) {
      auto obj = eval(*callee.children[0], scope);
      if (!obj.ok()) return obj;
      if (obj->is_undefined()) return undefined_error(callee, *obj);
      if (obj->is_string() || obj->is_dict() || obj->is_list()) {
        auto args = eval_args(e, scope);
        if (!args.ok()) return args.status();
        bool found = false;
        auto r = call_method(*obj, callee.name, *args, *this, found);
        if (found) {
          if (!r.ok()) return locate(e, r.status());
          return r;
        }
      }
      auto fn = get_attr(callee, *obj, callee.name);
      if (!fn.ok()) return fn;
      if (fn->is_function() && fn->function_name() == "loop.cycle") {
        auto args = eval_args(e, scope);
        if (!args.ok()) return args.status();
        if (!args->keyword.empty()) return fail(e, "loop.cycle() takes no keyword arguments");
        if (args->positional.empty()) return fail(e, "no items for cycling given");
        const Value* index0 = obj->find("index0");
        if (!index0 || !index0->is_int()) return fail(e, "loop.cycle() needs the loop's index0");
        const auto n = static_cast<std::int64_t>(args->positional.size());
        return args->positional[static_cast<std::size_t>(index0->as_int() % n)];
      }
      return call_value(e, *fn, scope);
    }
    auto fn = eval(callee, scope);
    if (!fn.ok()) return fn;
    return call_value(e, *fn, scope);
  }

  StatusOr<Value> call_value(const Expr& e, const Value& fn, const std::shared_ptr<Scope>& scope) {
    if (fn.is_undefined()) return undefined_error(e, fn);
    auto args = eval_args(e, scope);
    if (!args.ok()) return args.status();
    if (fn.is_function()) {
      if (fn.function_name() == "loop.changed") return fail(e, "loop.changed() is not supported");
      if (fn.function_name() == "loop.cycle") return fail(e, "loop.cycle() is only supported called as loop.cycle(...)");
      auto r = call_global(fn.function_name(), *args, *this);
      if (!r.ok()) return locate(e, r.status());
      return r;
    }
    if (fn.is_macro()) return call_macro(e, fn.as_macro(), *args);
    return fail(e, "'" + fn.type_name() + "' object is not callable");
  }

  StatusOr<Value> call_macro(const Expr& e, const MacroDef& def, const Args& args) {
    const Node& m = *def.node;
    const std::string& name = m.targets[0];
    if (depth_ >= limits_.max_call_depth)
      return fail(e, "macro calls nested more than " + std::to_string(limits_.max_call_depth) + " deep");
    if (args.positional.size() > m.params.size())
      return fail(e, "macro '" + name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
    auto scope = std::make_shared<Scope>();
    scope->parent = def.closure;
    std::vector<bool> given(m.params.size(), false);
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
      scope->vars[m.params[i].first] = args.positional[i];
      given[i] = true;
    }
    for (const auto& [k, v] : args.keyword) {
      std::size_t i = 0;
      while (i < m.params.size() && m.params[i].first != k) ++i;
      if (i == m.params.size()) return fail(e, "macro '" + name + "' takes no keyword argument '" + k + "'");
      if (given[i]) return fail(e, "macro '" + name + "' got multiple values for argument '" + k + "'");
      scope->vars[k] = v;
      given[i] = true;
    }
    for (std::size_t i = 0; i < m.params.size(); ++i) {
      if (given[i]) continue;
      if (m.params[i].second) {
        auto d = eval(*m.params[i].second, scope);
        if (!d.ok()) return d;
        scope->vars[m.params[i].first] = *d;
      } else {
        scope->vars[m.params[i].first] = Value::undefined("parameter '" + m.params[i].first + "' was not provided");
      }
    }
    ++depth_;
    std::string out;
    const Flow saved = flow_;
    flow_ = Flow::kNormal;
    Status s = exec_body(m.body, scope, out);
    flow_ = saved;
    --depth_;
    if (!s.ok()) return s;
    return Value::string(std::move(out));
  }

  StatusOr<Value> binary(const Expr& e, const std::string& op, const Value& l, const Value& r) {
    if (op == "~") {
      BoundedText text("'~'", limits_.max_output_bytes);
      append_str(text, l);
      append_str(text, r);
      auto s = text.take();
      if (!s.ok()) return locate(e, s.status());
      return Value::string(std::move(*s));
    }
    if (l.is_undefined()) return undefined_error(e, l);
    if (r.is_undefined()) return undefined_error(e, r);
    const bool ints = (l.is_int() || l.is_bool()) && (r.is_int() || r.is_bool());
    const bool nums = l.is_number() && r.is_number();
    if (op == "+") {
      if (ints) {
        std::int64_t x = 0;
        if (__builtin_add_overflow(l.as_int(), r.as_int(), &x)) return fail(e, "integer overflow");
        return Value::integer(x);
      }
      if (nums) return Value::floating(l.as_float() + r.as_float());
      // Each operand is within the limit, the sum maybe not: checked before it is built.
      if (l.is_string() && r.is_string()) {
        if (l.as_string().size() + r.as_string().size() > limits_.max_output_bytes)
          return locate(e, result_too_large("'+'", limits_.max_output_bytes));
        return Value::string(l.as_string() + r.as_string());
      }
      if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
        if (l.as_list().size() + r.as_list().size() > max_items())
          return locate(e, result_too_long("'+'", max_items()));
        List items = l.as_list();
        items.insert(items.end(), r.as_list().begin(), r.as_list().end());
        return Value::list(std::move(items), l.is_tuple());
      }
    } else if (op == "-") {
      if (ints) {
        std::int64_t x = 0;
        if (__builtin_sub_overflow(l.as_int(), r.as_int(), &x)) return fail(e, "integer overflow");
        return Value::integer(x);
      }
      if (nums) return Value::floating(l.as_float() - r.as_float());
    } else if (op == "*") {
      if (ints) {
        std::int64_t x = 0;
        if (__builtin_mul_overflow(l.as_int(), r.as_int(), &x)) return fail(e, "integer overflow");
        return Value::integer(x);
      }
      if (nums) return Value::floating(l.as_float() * r.as_float());
      const Value* seq = (l.is_string() || l.is_list()) ? &l : (r.is_string() || r.is_list()) ? &r : nullptr;
      const Value* count = seq == &l ? &r : &l;
      if (seq && (count->is_int() || count->is_bool())) {
        const std::size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
        // An empty sequence gives an empty result whatever the count, without looping count times.
        const std::int64_t n = unit == 0 ? 0 : std::max<std::int64_t>(0, count->as_int());
        // Divided, not multiplied: a large count would wrap the product below the limit.
        const std::size_t limit = seq->is_string() ? limits_.max_output_bytes : max_items();
        if (unit != 0 && static_cast<std::size_t>(n) > limit / unit)
          return locate(e, seq->is_string() ? result_too_large("'*'", limit) : result_too_long("'*'", limit));
        if (seq->is_string()) {
          std::string s;
          s.reserve(unit * static_cast<std::size_t>(n));  // within the limit, checked above
          for (std::int64_t i = 0; i < n; ++i) s += seq->as_string();
          return Value::string(std::move(s));
        }
        List items;
        items.reserve(unit * static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->as_list().begin(), seq->as_list().end());
        return Value::list(std::move(items), seq->is_tuple());
      }
    } else if (op == "/") {
      if (nums) {
        if (r.as_float() == 0.0) return fail(e, "division by zero");
        return Value::floating(l.as_float() / r.as_float());
      }
    } else if (op == "//" || op == "%") {
      if (nums) {
        if (r.as_float() == 0.0) return fail(e, op == "//" ? "integer division or modulo by zero" : "modulo by zero");
        if (ints) {
          const std::int64_t a = l.as_int(), b = r.as_int();
          if (a == INT64_MIN && b == -1) return fail(e, "integer overflow");
          std::int64_t q = a / b, m = a % b;
          if (m != 0 && ((m < 0) != (b < 0))) {
            --q;
            m += b;
          }
          return Value::integer(op == "//" ? q : m);
        }
        const double a = l.as_float(), b = r.as_float();
        double m = std::fmod(a, b);
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        if (op == "%") return Value::floating(m == 0 ? std::copysign(0.0, b) : m);
        // CPython's float floor division.
        double mod = std::fmod(a, b);
        double div = (a - mod) / b;
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
        double floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
        if (div == 0) floordiv = std::copysign(0.0, a / b);
        return Value::floating(floordiv);
      }
      if (op == "%" && l.is_string()) return fail(e, "unsupported template construct: '%' string formatting");
    } else if (op == "**") {
      if (ints && r.as_int() >= 0) {
        std::int64_t result = 1, base = l.as_int();
        for (std::int64_t i = 0; i < r.as_int(); ++i)
          if (__builtin_mul_overflow(result, base, &result)) return fail(e, "integer overflow");
        return Value::integer(result);
      }
      if (nums) return Value::floating(std::pow(l.as_float(), r.as_float()));
    }
    return fail(e, "unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
  }

  // Python ordering of two values; nullopt when they cannot be ordered.
  static std::optional<int> order(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
      if (a.is_float() || b.is_float()) {
        const double x = a.as_float(), y = b.as_float();
        if (std::isnan(x) || std::isnan(y)) return std::nullopt;
        return x < y ? -1 : x > y ? 1 : 0;
      }
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (equals(x[i], y[i])) continue;
        return order(x[i], y[i]);
      }
      return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    return std::nullopt;
  }

  StatusOr<bool> compare(const Expr& e, const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in" || op == "not in") {
      bool found = false;
      if (r.is_string()) {
        if (l.is_undefined()) return undefined_error(e, l);
        if (!l.is_string())
          return fail(e, "'in <string>' requires string as left operand, not " + l.type_name());
        found = r.as_string().find(l.as_string()) != std::string::npos;
      } else if (r.is_list()) {
        for (const auto& x : r.as_list()) found = found || equals(x, l);
      } else if (r.is_dict()) {
        if (l.is_dict() || (l.is_list() && !l.is_tuple())) return fail(e, "unhashable type: '" + l.type_name() + "'");
        found = r.find(l) != nullptr;
      } else if (!r.is_undefined()) {
        return fail(e, "argument of type '" + r.type_name() + "' is not iterable");
      }
      return op == "in" ? found : !found;
    }
    if (l.is_undefined()) return undefined_error(e, l);
    if (r.is_undefined()) return undefined_error(e, r);
    const auto o = order(l, r);
    if (!o) {
      if ((l.is_float() && std::isnan(l.as_float())) || (r.is_float() && std::isnan(r.as_float()))) return false;
      return fail(e, "'" + op + "' not supported between instances of '" + l.type_name() + "' and '" + r.type_name() + "'");
    }
    if (op == "<") return *o < 0;
    if (op == "<=") return *o <= 0;
    if (op == ">") return *o > 0;
    return *o >= 0;
  }

  const Template& tmpl_;
  std::vector<std::shared_ptr<Scope>> macro_scopes_;  // scopes a macro closes over
  RenderLimits limits_;
  std::int64_t steps_ = 0;
  std::size_t value_bytes_ = 0;
  int depth_ = 0;
  int nest_ = 0;
  Flow flow_ = Flow::kNormal;
};

}  // namespace

StatusOr<std::string> render(const Template& tmpl, const Value& context, const RenderLimits& limits) {
  return Interpreter(tmpl, limits).run(context);
}

}  // namespace sy::text::jinja
