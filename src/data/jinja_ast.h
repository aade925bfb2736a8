#pragma once
// The syntax tree of a chat template: expressions and statements, as
// jinja_parser.cpp builds them and jinja_template.cpp evaluates them.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/jinja_value.h"

namespace lt::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,      // literal
    kName,         // name
    kList,         // operands: the items
    kTuple,        // operands: the items; a Python tuple (Note [tuples] in jinja_value.h)
    kDict,         // operands: key, value, key, value, ...
    kAttribute,    // operands[0].name
    kSubscript,    // operands[0][operands[1]]
    kSlice,        // operands[0][start:stop:step]; operands 1..3, null when left out
    kCall,         // operands[0](operands[1..], keywords)
    kFilter,       // operands[0] | name(operands[1..], keywords)
    kTest,         // operands[0] is [not] name(operands[1..])
    kUnary,        // name (the operator: "not", "-", "+") operands[0]
    kBinary,       // operands[0] name operands[1]; and/or short-circuit
    kCompare,      // operands[0] comparisons[0] operands[1] comparisons[1] ...: a chain
                   // of two or more comparisons, Python's: each operand evaluated once,
                   // stopping at the first false one
    kConditional,  // operands[0] if operands[1] else operands[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  bool negated = false;                  // kTest: "is not"
  std::vector<std::string> comparisons;  // kCompare: "<", "==", "not in", ...
  // A kCall is in this expression: evaluating it may run a macro's
  // statements (Note [stored values] in jinja_template.cpp).
  bool calls = false;
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ value }}
    kIf,        // branches: (condition, body)...; a null condition is the else
    kFor,       // for targets in value [if filter]: body [else: else_body]
    kSet,       // set targets = value, or set targets[0].attribute = value
    kSetBlock,  // set targets[0] %}body{% endset
    kMacro,     // macro text(targets...) %}body{% endmacro: defines the macro `text`
    kBreak,
    kContinue,
  };
  Node(Kind node_kind, int node_line, std::string node_text = "")
      : kind(node_kind), line(node_line), text(std::move(node_text)) {}

  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr value;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  // kMacro: the defaults of the last defaults.size() parameters, and
  // whether the body reads `varargs` / `kwargs`, which then hold the extra
  // positional / keyword arguments (jinja2's catch_varargs, catch_kwargs).
  std::vector<ExprPtr> defaults;
  bool takes_varargs = false;
  bool takes_kwargs = false;
};

// Counts one level of recursion for as long as it lives; past `limit`
// levels it calls fail_too_deep (which throws) instead. The parser and the
// renderer refuse what nests too deeply rather than run out of stack.
class NestingGuard {
 public:
  template <typename Fail>
  NestingGuard(int& depth, int limit, Fail&& fail_too_deep) : depth_(depth) {
    if (++depth_ > limit) {
      --depth_;
      fail_too_deep();
    }
  }
  ~NestingGuard() { --depth_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  int& depth_;
};

// Walks `body` in the order jinja2's node visitors take a node's fields (a
// for loop's targets before its iterable and body, a set's targets before
// its value, a macro's parameters before its defaults and body): `bind`
// gets each name a statement binds, `read` each expression it holds.
void walk(Body& body, const std::function<void(const std::string&)>& bind,
          const std::function<void(Expr&)>& read);

// Sets Expr::calls through the tree of `e`; returns the root's.
bool note_calls(Expr& e);

// Which of `names` the body reads before it binds them, as jinja2's
// find_undeclared decides whether a macro takes varargs, kwargs or caller.
std::set<std::string> read_before_bound(Body& body, std::set<std::string> names);

}  // namespace lt::data::jinja
