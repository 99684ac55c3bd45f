#include "engine/text/jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "engine/text/jinja/builtins.h"
#include "engine/text/jinja/lexer.h"

namespace sy::text::jinja {
namespace {

// Deeper nesting than this is refused rather than risking the stack (templates are outside input).
constexpr int kMaxNesting = 200;
// Expression trees deeper than this are refused (long operator chains grow them without nesting).
constexpr int kMaxExprDepth = 300;

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view origin) : toks_(std::move(tokens)), origin_(origin) {}

  StatusOr<Template> run() {
    Template t;
    t.origin = std::string(origin_);
    std::string end;
    SY_RETURN_IF_ERROR(body(t.body, {}, "", end));
    return t;
  }

 private:
  using Kind = Token::Kind;

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().kind == Kind::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == Kind::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  Status error_at(const Token& t, const std::string& message) const {
    return Status::Error(std::string(origin_) + ":" + std::to_string(t.line) + ":" + std::to_string(t.col) + ": " +
                         message);
  }
  Status error(const std::string& message) const { return error_at(cur(), message); }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Kind::kEof: return "end of template";
      case Kind::kBlockEnd: return "end of statement block";
      case Kind::kVarEnd: return "end of print statement";
      case Kind::kString: return "string";
      case Kind::kInt:
      case Kind::kFloat: return "number '" + t.text + "'";
      default: return "'" + t.text + "'";
    }
  }

  Status expect_op(const char* op) {
    if (skip_op(op)) return Status::Ok();
    return error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  Status expect_block_end() {
    if (cur().kind == Kind::kBlockEnd) {
      advance();
      return Status::Ok();
    }
    return error("expected end of statement block, got " + describe(cur()));
  }
  StatusOr<std::string> expect_name() {
    if (cur().kind != Kind::kName) return error("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    advance();
    return n;
  }

  Status check_depth(const Expr& e) const {
    if (e.depth <= kMaxExprDepth) return Status::Ok();
    return error_at(Token{Token::Kind::kEof, "", e.line, e.col},
                    "expression nested more than " + std::to_string(kMaxExprDepth) + " deep");
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  NodePtr make_node(Node::Kind kind, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  // Statements until one of `ends` opens a block tag; `end` receives which one (the tag name has
  // been consumed, the rest of that tag has not). `ends` empty: until the end of the template.
  Status body(Body& out, const std::set<std::string>& ends, const std::string& opener, std::string& end) {
    if (++nesting_ > kMaxNesting) return error("blocks nested more than " + std::to_string(kMaxNesting) + " deep");
    while (true) {
      const Token& t = cur();
      if (t.kind == Kind::kEof) {
        if (ends.empty()) break;
        std::string want;
        for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
        return error("unexpected end of template: looking for " + want + " to close '" + opener + "'");
      }
      if (t.kind == Kind::kText) {
        auto n = make_node(Node::Kind::kText, t);
        n->text = t.text;
        out.push_back(std::move(n));
        advance();
      } else if (t.kind == Kind::kVarBegin) {
        advance();
        auto n = make_node(Node::Kind::kOutput, t);
        auto e = tuple(true, {});
        if (!e.ok()) return e.status();
        n->expr = std::move(*e);
        if (cur().kind != Kind::kVarEnd) return error("expected end of print statement, got " + describe(cur()));
        advance();
        out.push_back(std::move(n));
      } else if (t.kind == Kind::kBlockBegin) {
        advance();
        if (cur().kind == Kind::kName && ends.count(cur().text)) {
          end = cur().text;
          advance();
          --nesting_;
          return Status::Ok();
        }
        SY_RETURN_IF_ERROR(statement(out));
      } else {
        return error("unexpected " + describe(t));
      }
    }
    --nesting_;
    return Status::Ok();
  }

  Status statement(Body& out) {
    const Token at = cur();
    if (at.kind != Kind::kName) return error("expected a statement name, got " + describe(at));
    const std::string& tag = at.text;
    if (tag == "if") return parse_if(out);
    if (tag == "for") return parse_for(out);
    if (tag == "set") return parse_set(out);
    if (tag == "macro") return parse_macro(out);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return error("'" + tag + "' outside a for loop");
      advance();
      out.push_back(make_node(tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, at));
      return expect_block_end();
    }
    if (tag == "generation") {
      // transformers' AssistantTracker tag: marks assistant text for return_assistant_tokens_mask
      // and renders its body unchanged, which is all a prompt needs.
      advance();
      SY_RETURN_IF_ERROR(expect_block_end());
      std::string end;
      SY_RETURN_IF_ERROR(body(out, {"endgeneration"}, "generation", end));
      return expect_block_end();
    }
    static const std::set<std::string> kUnsupported = {"include", "extends", "import", "from", "block", "call",
                                                         "filter", "with", "autoescape", "do", "trans"};
    if (kUnsupported.count(tag)) return error("unsupported template construct '{% " + tag + " %}'");
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else")
      return error("unexpected '" + tag + "' (no open block it closes)");
    return error("unknown tag '" + tag + "'");
  }

  Status parse_if(Body& out) {
    auto node = make_node(Node::Kind::kIf, cur());
    advance();
    while (true) {
      auto cond = tuple(false, {});
      if (!cond.ok()) return cond.status();
      SY_RETURN_IF_ERROR(expect_block_end());
      Body b;
      std::string end;
      SY_RETURN_IF_ERROR(body(b, {"elif", "else", "endif"}, "if", end));
      node->branches.emplace_back(std::move(*cond), std::move(b));
      if (end == "elif") continue;
      if (end == "else") {
        SY_RETURN_IF_ERROR(expect_block_end());
        SY_RETURN_IF_ERROR(body(node->else_body, {"endif"}, "if", end));
      }
      break;
    }
    out.push_back(std::move(node));
    return expect_block_end();
  }

  Status assign_targets(std::vector<std::string>& names, const char* stop) {
    const bool parens = skip_op("(");
    while (true) {
      auto n = expect_name();
      if (!n.ok()) return n.status();
      names.push_back(*n);
      if (!skip_op(",")) break;
      if (parens && is_op(")")) break;
      if (!parens && is_name(stop)) break;
    }
    if (parens) SY_RETURN_IF_ERROR(expect_op(")"));
    return Status::Ok();
  }

  Status parse_for(Body& out) {
    auto node = make_node(Node::Kind::kFor, cur());
    advance();
    SY_RETURN_IF_ERROR(assign_targets(node->targets, "in"));
    if (!skip_name("in")) return error("expected 'in' in for loop, got " + describe(cur()));
    auto iter = tuple(false, {"recursive"});
    if (!iter.ok()) return iter.status();
    node->expr = std::move(*iter);
    if (skip_name("if")) {
      auto f = expression(true);
      if (!f.ok()) return f.status();
      node->filter = std::move(*f);
    }
    if (is_name("recursive")) return error("unsupported template construct 'recursive' for loop");
    SY_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    ++loop_depth_;
    SY_RETURN_IF_ERROR(body(node->body, {"endfor", "else"}, "for", end));
    --loop_depth_;
    if (end == "else") {
      SY_RETURN_IF_ERROR(expect_block_end());
      // break/continue in the else block belong to an enclosing loop, if any.
      const int saved = loop_depth_;
      SY_RETURN_IF_ERROR(body(node->else_body, {"endfor"}, "for", end));
      loop_depth_ = saved;
    }
    out.push_back(std::move(node));
    return expect_block_end();
  }

  Status parse_set(Body& out) {
    const Token at = cur();
    advance();
    std::vector<std::string> names;
    std::string attr;
    if (cur().kind == Kind::kName && peek().kind == Kind::kOp && peek().text == ".") {
      names.push_back(cur().text);
      advance();
      advance();
      auto a = expect_name();
      if (!a.ok()) return a.status();
      attr = *a;
    } else {
      SY_RETURN_IF_ERROR(assign_targets(names, ""));
    }
    if (skip_op("=")) {
      auto node = make_node(Node::Kind::kSet, at);
      node->targets = std::move(names);
      node->attr = std::move(attr);
      auto e = tuple(true, {});
      if (!e.ok()) return e.status();
      node->expr = std::move(*e);
      out.push_back(std::move(node));
      return expect_block_end();
    }
    if (!attr.empty() || names.size() != 1) return error("expected '=' in set, got " + describe(cur()));
    auto node = make_node(Node::Kind::kSetBlock, at);
    node->targets = std::move(names);
    if (is_op("|")) {
      auto f = filters(nullptr);
      if (!f.ok()) return f.status();
      for (const Expr* e = f->get(); e; e = e->children[0].get())
        if (e->kind != Expr::Kind::kFilter) return error_at(at, "expected only filters after '{% set name'");
      node->expr = std::move(*f);
    }
    SY_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    SY_RETURN_IF_ERROR(body(node->body, {"endset"}, "set", end));
    out.push_back(std::move(node));
    return expect_block_end();
  }

  Status parse_macro(Body& out) {
    auto node = make_node(Node::Kind::kMacro, cur());
    advance();
    auto name = expect_name();
    if (!name.ok()) return name.status();
    node->targets.push_back(*name);
    SY_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (!node->params.empty()) SY_RETURN_IF_ERROR(expect_op(","));
      if (is_op(")")) break;
      auto p = expect_name();
      if (!p.ok()) return p.status();
      ExprPtr def;
      if (skip_op("=")) {
        auto d = expression(true);
        if (!d.ok()) return d.status();
        def = std::move(*d);
      } else if (!node->params.empty() && node->params.back().second) {
        return error("non-default argument '" + *p + "' follows default argument");
      }
      node->params.emplace_back(*p, std::move(def));
    }
    advance();
    SY_RETURN_IF_ERROR(expect_block_end());
    const int saved = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    SY_RETURN_IF_ERROR(body(node->body, {"endmacro"}, "macro", end));
    loop_depth_ = saved;
    if (cur().kind == Kind::kName) advance();  // {% endmacro name %}
    out.push_back(std::move(node));
    return expect_block_end();
  }

  bool at_tuple_end(const std::set<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.kind == Kind::kVarEnd || t.kind == Kind::kBlockEnd || t.kind == Kind::kEof) return true;
    if (t.kind == Kind::kOp && t.text == ")") return true;
    return t.kind == Kind::kName && extra_end.count(t.text);
  }

  // Comma-separated expressions; a comma makes a tuple.
  StatusOr<ExprPtr> tuple(bool with_condexpr, const std::set<std::string>& extra_end, bool explicit_parens = false) {
    const Token at = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        is_tuple = true;
      }
      if (at_tuple_end(extra_end)) break;
      auto e = expression(with_condexpr);
      if (!e.ok()) return e.status();
      items.push_back(std::move(*e));
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return error("expected an expression, got " + describe(cur()));
    }
    auto t = make(Expr::Kind::kTuple, at);
    for (auto& item : items) t->add(std::move(item));
    return t;
  }

  StatusOr<ExprPtr> expression(bool with_condexpr) {
    if (++nesting_ > kMaxNesting) return error("expression nested more than " + std::to_string(kMaxNesting) + " deep");
    auto r = with_condexpr ? condexpr() : or_expr();
    --nesting_;
    if (r.ok()) SY_RETURN_IF_ERROR(check_depth(**r));
    return r;
  }

  StatusOr<ExprPtr> condexpr() {
    auto e = or_expr();
    if (!e.ok()) return e;
    ExprPtr expr = std::move(*e);
    while (is_name("if")) {
      const Token at = cur();
      advance();
      auto cond = or_expr();
      if (!cond.ok()) return cond;
      ExprPtr other;
      if (skip_name("else")) {
        auto o = expression(true);
        if (!o.ok()) return o;
        other = std::move(*o);
      }
      auto c = make(Expr::Kind::kCondExpr, at);
      c->add(std::move(*cond));
      c->add(std::move(expr));
      c->add(std::move(other));
      expr = std::move(c);
      SY_RETURN_IF_ERROR(check_depth(*expr));
    }
    return expr;
  }

  template <class Next>
  StatusOr<ExprPtr> binary_chain(Next next, Expr::Kind kind, const char* word) {
    auto l = (this->*next)();
    if (!l.ok()) return l;
    ExprPtr left = std::move(*l);
    while (is_name(word)) {
      const Token at = cur();
      advance();
      auto r = (this->*next)();
      if (!r.ok()) return r;
      auto b = make(kind, at);
      b->add(std::move(left));
      b->add(std::move(*r));
      left = std::move(b);
      SY_RETURN_IF_ERROR(check_depth(*left));
    }
    return left;
  }

  StatusOr<ExprPtr> or_expr() { return binary_chain(&Parser::and_expr, Expr::Kind::kOr, "or"); }
  StatusOr<ExprPtr> and_expr() { return binary_chain(&Parser::not_expr, Expr::Kind::kAnd, "and"); }

  StatusOr<ExprPtr> not_expr() {
    if (is_name("not")) {
      const Token at = cur();
      advance();
      if (++nesting_ > kMaxNesting) return error("expression nested too deeply");
      auto e = not_expr();
      --nesting_;
      if (!e.ok()) return e;
      auto n = make(Expr::Kind::kNot, at);
      n->add(std::move(*e));
      return n;
    }
    return compare();
  }

  StatusOr<ExprPtr> compare() {
    const Token at = cur();
    auto first = math1();
    if (!first.ok()) return first;
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == Kind::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                      cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().kind == Kind::kName && peek().text == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      auto rhs = math1();
      if (!rhs.ok()) return rhs;
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, at);
        cmp->add(std::move(*first));
      }
      cmp->ops.push_back(op);
      cmp->add(std::move(*rhs));
      SY_RETURN_IF_ERROR(check_depth(*cmp));
    }
    if (cmp) return cmp;
    return std::move(*first);
  }

  StatusOr<ExprPtr> binary_ops(StatusOr<ExprPtr> (Parser::*next)(), std::initializer_list<const char*> ops) {
    auto l = (this->*next)();
    if (!l.ok()) return l;
    ExprPtr left = std::move(*l);
    while (true) {
      const char* matched = nullptr;
      for (const char* op : ops)
        if (is_op(op)) matched = op;
      if (!matched) break;
      const Token at = cur();
      advance();
      auto r = (this->*next)();
      if (!r.ok()) return r;
      auto b = make(Expr::Kind::kBinary, at);
      b->name = matched;
      b->add(std::move(left));
      b->add(std::move(*r));
      left = std::move(b);
      SY_RETURN_IF_ERROR(check_depth(*left));
    }
    return left;
  }

  StatusOr<ExprPtr> math1() { return binary_ops(&Parser::concat, {"+", "-"}); }
  StatusOr<ExprPtr> concat() { return binary_ops(&Parser::math2, {"~"}); }
  StatusOr<ExprPtr> math2() { return binary_ops(&Parser::pow, {"*", "/", "//", "%"}); }
  StatusOr<ExprPtr> pow() { return binary_ops(&Parser::unary_filtered, {"**"}); }
  StatusOr<ExprPtr> unary_filtered() { return unary(true); }

  StatusOr<ExprPtr> unary(bool with_filter) {
    if (++nesting_ > kMaxNesting) return error("expression nested more than " + std::to_string(kMaxNesting) + " deep");
    const Token at = cur();
    StatusOr<ExprPtr> node = ExprPtr();
    if (is_op("-") || is_op("+")) {
      const bool neg = is_op("-");
      advance();
      auto operand = unary(false);
      if (!operand.ok()) return operand;
      auto n = make(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, at);
      n->add(std::move(*operand));
      node = std::move(n);
    } else {
      node = primary();
    }
    if (!node.ok()) return node;
    node = postfix(std::move(*node));
    if (node.ok() && with_filter) node = filters(std::move(*node));
    --nesting_;
    return node;
  }

  StatusOr<ExprPtr> primary() {
    const Token at = cur();
    switch (at.kind) {
      case Kind::kName: {
        advance();
        auto lit = make(Expr::Kind::kLiteral, at);
        if (at.text == "true" || at.text == "True") lit->literal = Value::boolean(true);
        else if (at.text == "false" || at.text == "False") lit->literal = Value::boolean(false);
        else if (at.text == "none" || at.text == "None") lit->literal = Value::none();
        else {
          auto n = make(Expr::Kind::kName, at);
          n->name = at.text;
          return n;
        }
        return lit;
      }
      case Kind::kString: {
        std::string s;
        while (cur().kind == Kind::kString) {
          s += cur().text;
          advance();
        }
        auto lit = make(Expr::Kind::kLiteral, at);
        lit->literal = Value::string(std::move(s));
        return lit;
      }
      case Kind::kInt: {
        advance();
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(at.text.c_str(), &end, 10);
        if (errno == ERANGE) return error_at(at, "integer literal " + at.text + " is out of the supported 64-bit range");
        auto lit = make(Expr::Kind::kLiteral, at);
        lit->literal = Value::integer(v);
        return lit;
      }
      case Kind::kFloat: {
        advance();
        auto lit = make(Expr::Kind::kLiteral, at);
        lit->literal = Value::floating(std::strtod(at.text.c_str(), nullptr));
        return lit;
      }
      case Kind::kOp:
        if (at.text == "(") {
          advance();
          auto t = tuple(true, {}, true);
          if (!t.ok()) return t;
          SY_RETURN_IF_ERROR(expect_op(")"));
          return t;
        }
        if (at.text == "[") {
          advance();
          auto l = make(Expr::Kind::kList, at);
          while (!is_op("]")) {
            if (!l->children.empty()) SY_RETURN_IF_ERROR(expect_op(","));
            if (is_op("]")) break;
            auto e = expression(true);
            if (!e.ok()) return e;
            l->add(std::move(*e));
          }
          advance();
          return l;
        }
        if (at.text == "{") {
          advance();
          auto d = make(Expr::Kind::kDict, at);
          while (!is_op("}")) {
            if (!d->children.empty()) SY_RETURN_IF_ERROR(expect_op(","));
            if (is_op("}")) break;
            auto k = expression(true);
            if (!k.ok()) return k;
            SY_RETURN_IF_ERROR(expect_op(":"));
            auto v = expression(true);
            if (!v.ok()) return v;
            d->add(std::move(*k));
            d->add(std::move(*v));
          }
          advance();
          return d;
        }
        break;
      default: break;
    }
    return error("unexpected " + describe(at));
  }

  StatusOr<ExprPtr> postfix(ExprPtr node) {
    while (true) {
      const Token at = cur();
      if (is_op(".")) {
        advance();
        if (cur().kind == Kind::kName) {
          auto g = make(Expr::Kind::kGetAttr, at);
          g->name = cur().text;
          g->add(std::move(node));
          node = std::move(g);
          advance();
        } else if (cur().kind == Kind::kInt) {
          auto g = make(Expr::Kind::kGetItem, at);
          auto idx = make(Expr::Kind::kLiteral, cur());
          idx->literal = Value::integer(std::strtoll(cur().text.c_str(), nullptr, 10));
          g->add(std::move(node));
          g->add(std::move(idx));
          node = std::move(g);
          advance();
        } else {
          return error("expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        advance();
        auto s = subscript(std::move(node), at);
        if (!s.ok()) return s;
        node = std::move(*s);
      } else if (is_op("(")) {
        auto c = call(std::move(node));
        if (!c.ok()) return c;
        node = std::move(*c);
      } else {
        return node;
      }
      SY_RETURN_IF_ERROR(check_depth(*node));
    }
  }

  StatusOr<ExprPtr> subscript(ExprPtr obj, const Token& at) {
    std::vector<ExprPtr> parts;  // start, stop, step
    bool slice = false;
    auto part = [&]() -> Status {
      if (is_op(":") || is_op("]")) {
        parts.emplace_back();
        return Status::Ok();
      }
      auto e = expression(true);
      if (!e.ok()) return e.status();
      parts.push_back(std::move(*e));
      return Status::Ok();
    };
    SY_RETURN_IF_ERROR(part());
    if (skip_op(":")) {
      slice = true;
      SY_RETURN_IF_ERROR(part());
      if (skip_op(":")) SY_RETURN_IF_ERROR(part());
    }
    if (is_op(",")) return error("unsupported template construct: tuple subscript");
    SY_RETURN_IF_ERROR(expect_op("]"));
    if (!slice) {
      if (!parts[0]) return error_at(at, "expected an expression in '[]'");
      auto g = make(Expr::Kind::kGetItem, at);
      g->add(std::move(obj));
      g->add(std::move(parts[0]));
      return g;
    }
    auto s = make(Expr::Kind::kSlice, at);
    s->add(std::move(obj));
    parts.resize(3);
    for (auto& p : parts) s->add(std::move(p));
    return s;
  }

  // "(" args ")" after a callee, a filter name or a test name; children[1..] get the positionals.
  Status call_args(Expr& into) {
    SY_RETURN_IF_ERROR(expect_op("("));
    bool first = true;
    while (!is_op(")")) {
      if (!first) SY_RETURN_IF_ERROR(expect_op(","));
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) return error("unsupported template construct: '*' or '**' arguments");
      if (cur().kind == Kind::kName && peek().kind == Kind::kOp && peek().text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        auto v = expression(true);
        if (!v.ok()) return v.status();
        into.add_kwarg(std::move(key), std::move(*v));
      } else {
        if (!into.kwargs.empty()) return error("positional argument follows keyword argument");
        auto v = expression(true);
        if (!v.ok()) return v.status();
        into.add(std::move(*v));
      }
    }
    advance();
    return Status::Ok();
  }

  StatusOr<ExprPtr> call(ExprPtr callee) {
    auto c = make(Expr::Kind::kCall, cur());
    c->line = callee->line;
    c->col = callee->col;
    c->add(std::move(callee));
    SY_RETURN_IF_ERROR(call_args(*c));
    return c;
  }

  StatusOr<std::string> dotted_name() {
    auto n = expect_name();
    if (!n.ok()) return n;
    std::string name = *n;
    while (is_op(".") && peek().kind == Kind::kName) {
      advance();
      name += "." + cur().text;
      advance();
    }
    return name;
  }

  // Filters, tests and calls after an operand (jinja2's parse_filter_expr); node may be null
  // for the filter section of a block set.
  StatusOr<ExprPtr> filters(ExprPtr node) {
    while (true) {
      const Token at = cur();
      if (is_op("|")) {
        advance();
        const Token name_tok = cur();
        auto name = dotted_name();
        if (!name.ok()) return name.status();
        if (!is_known_filter(*name)) return error_at(name_tok, "unsupported filter '" + *name + "'");
        auto f = make(Expr::Kind::kFilter, at);
        f->name = *name;
        f->add(std::move(node));
        if (is_op("(")) SY_RETURN_IF_ERROR(call_args(*f));
        node = std::move(f);
      } else if (is_name("is") && node) {
        advance();
        auto t = make(Expr::Kind::kTest, at);
        t->negated = skip_name("not");
        const Token name_tok = cur();
        auto name = dotted_name();
        if (!name.ok()) return name.status();
        if (!is_known_test(*name)) return error_at(name_tok, "unsupported test '" + *name + "'");
        t->name = *name;
        t->add(std::move(node));
        const Token& n = cur();
        if (is_op("(")) {
          SY_RETURN_IF_ERROR(call_args(*t));
        } else if ((n.kind == Kind::kName || n.kind == Kind::kString || n.kind == Kind::kInt ||
                    n.kind == Kind::kFloat || is_op("[") || is_op("{")) &&
                   !(n.kind == Kind::kName && (n.text == "else" || n.text == "or" || n.text == "and"))) {
          if (n.kind == Kind::kName && n.text == "is") return error("you cannot chain multiple tests with 'is'");
          auto arg = primary();
          if (!arg.ok()) return arg;
          auto p = postfix(std::move(*arg));
          if (!p.ok()) return p;
          t->add(std::move(*p));
        }
        node = std::move(t);
      } else if (is_op("(") && node) {
        auto c = call(std::move(node));
        if (!c.ok()) return c;
        node = std::move(*c);
      } else {
        return node;
      }
      SY_RETURN_IF_ERROR(check_depth(*node));
    }
  }

  std::vector<Token> toks_;
  std::string_view origin_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

StatusOr<Template> parse_template(std::string_view source, std::string_view origin) {
  auto tokens = tokenize(source, origin);
  if (!tokens.ok()) return tokens.status();
  return Parser(std::move(*tokens), origin).run();
}

}  // namespace sy::text::jinja
