// The syntax tree of a parsed Jinja template: expressions and statements, each with the line and
// column it came from so that run-time errors can point at the template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/text/jinja/value.h"

namespace sy::text::jinja {

struct Expr;
struct Node;
using ExprPtr = std::unique_ptr<Expr>;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // children
    kTuple,     // children
    kDict,      // children: key, value, key, value, ...
    kGetAttr,   // children[0] . name
    kGetItem,   // children[0] [ children[1] ]
    kSlice,     // children[0] [ children[1] : children[2] : children[3] ] (null where omitted)
    kCall,      // children[0] ( children[1..], kwargs )
    kFilter,    // children[0] | name ( children[1..], kwargs ); children[0] null in {% set x | f %}
    kTest,      // children[0] is [not] name ( children[1..] )
    kNeg,       // - children[0]
    kPos,       // + children[0]
    kNot,       // not children[0]
    kAnd,       // children[0] and children[1]
    kOr,        // children[0] or children[1]
    kBinary,    // children[0] op children[1]: + - * / // % ** ~
    kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondExpr,  // children[1] if children[0] else children[2] (children[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;  // name, attribute, filter, test or operator
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  int depth = 1;  // of the tree below, kept as children are added: outside templates must not nest unboundedly

  void add(ExprPtr child) {
    if (child && child->depth >= depth) depth = child->depth + 1;
    children.push_back(std::move(child));
  }
  void add_kwarg(std::string key, ExprPtr value) {
    if (value && value->depth >= depth) depth = value->depth + 1;
    kwargs.emplace_back(std::move(key), std::move(value));
  }
};

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;                 // kText
  ExprPtr expr;                     // kOutput, kSet value, kFor iterable, kSetBlock filter chain
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: condition and body, in order
  Body body;                        // kFor, kSetBlock, kMacro
  Body else_body;                   // kIf, kFor
  std::vector<std::string> targets; // kFor, kSet, kSetBlock: names bound (several unpack a tuple)
  std::string attr;                 // kSet of a namespace attribute: targets[0].attr
  ExprPtr filter;                   // kFor ... if filter
  // kMacro: name in targets[0]; parameters and their defaults (null: required).
  std::vector<std::pair<std::string, ExprPtr>> params;
};

struct Template {
  Body body;
  std::string origin;
};

}  // namespace sy::text::jinja
