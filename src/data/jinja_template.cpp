#include "data/jinja_template.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/jinja_builtins.h"
#include "data/jinja_lexer.h"
#include "data/jinja_macro.h"
#include "data/jinja_parser.h"
#include "data/jinja_strings.h"

namespace lt::data::jinja {

namespace {

const Value& undefined_value() {
  static const Value kUndefined = undefined();
  return kUndefined;
}

bool is_comparison(const std::string& op) {
  return op == "==" || op == "!=" || op == "<" || op == ">" || op == "<=" || op == ">=" ||
         op == "in" || op == "not in";
}

// How deep macro calls may nest: about where jinja2, five Python frames a
// call under Python's default recursion limit of 1000, stops with a
// RecursionError (a macro that recurses forever is an error, not a crash).
constexpr int kMaxMacroDepth = 190;

// How deep statements and expressions may run within each other, into the
// macros they call: the parser bounds a template's own nesting, but macro
// calls stack theirs. A level takes up to about 1.5 KiB of stack, so a
// rendering stays within 1 MiB (a worker thread's stack may be 2 MiB).
constexpr int kMaxRenderNesting = 640;

// One scope of variables: the template's, a for loop iteration's or a macro
// call's. It sees its parent's variables: a loop iteration's parent is the
// scope the loop runs in, a macro call's the scope the macro was defined
// in, never its caller's (jinja2's closures).
struct Scope {
  explicit Scope(std::shared_ptr<Scope> enclosing, Value names = Value::object())
      : variables(std::move(names)), parent(std::move(enclosing)) {}
  Value variables;
  std::shared_ptr<Scope> parent;
  bool ended_iteration = false;  // a for loop iteration that is over
};

// One rendering: the variable scopes and the output.
class Renderer {
 public:
  Renderer(const std::string& name, Value variables)
      : name_(name),
        scope_(std::make_shared<Scope>(
            nullptr, variables.is_object() ? std::move(variables) : Value::object())) {}

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Note [loop]: a running for loop, what `loop` reads (jinja2's
  // LoopContext). The iteration scope binds the name `loop` to a marker
  // (Note [markers] in jinja_value.h) holding the loop's index in loops_,
  // so that `loop` resolves through the scopes like any name: an
  // inner loop's shadows the outer one, and an inner loop's `if` filter sees
  // the outer one, as in jinja2. The marker is never a value a template
  // computes with: `loop` reads only as loop.<attribute>, loop['attribute'],
  // loop.cycle(...), loop.changed(...) and `loop is [not] defined`; anything
  // else, and an attribute jinja2 does not have, is an error rather than a
  // silent "".
  struct LoopState {
    Value items;  // what the loop iterates, after its `if` filter
    size_t index0 = 0;
    std::optional<Value> last_changed;  // loop.changed()'s previous arguments
  };

  // A macro as {% macro %} defined it: the macro's value holds its index in
  // macros_ (Note [markers]).
  struct MacroDefinition {
    const Node* node;
    std::shared_ptr<Scope> scope;  // where it was defined: what its body sees
  };

  template <typename... Args>
  [[noreturn]] void fail_at(int line, const Args&... what) const {
    fail(name_, ":", line, ": ", what...);
  }

  [[noreturn]] void fail_nesting(int line) const {
    fail_at(line, "the template nests more than ", kMaxRenderNesting,
            " statements and expressions deep as it runs, macro calls included");
  }

  // Runs a builtin, adding the template's name and line to its errors.
  template <typename F>
  auto located(int line, F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const TemplateRaised& e) {  // kept apart: its callers name the row
      throw TemplateRaised(name_ + ":" + std::to_string(line) + ": " + e.what());
    } catch (const Error& e) {
      fail_at(line, e.what());
    }
  }

  Flow exec(const Body& body, std::string& out) {
    for (const Node& node : body) {
      Flow flow = exec(node, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Node& node, std::string& out) {
    NestingGuard guard(nesting_, kMaxRenderNesting, [&] { fail_nesting(node.line); });
    switch (node.kind) {
      case Node::Kind::kText:
        out += node.text;
        return Flow::kNormal;
      case Node::Kind::kOutput:
        out += to_text(value_of(*node.value, scratch_));
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [condition, body] : node.branches) {
          if (!condition || truthy(eval(*condition))) return exec(body, out);
        }
        return Flow::kNormal;
      case Node::Kind::kFor:
        return exec_for(node, out);
      case Node::Kind::kSet:
        exec_set(node, eval(*node.value));
        return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string captured;
        exec(node.body, captured);
        exec_set(node, Value(std::move(captured)));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro:
        scope_->variables[node.text] = macro_value(node.text, macros_.size());
        macros_.push_back(MacroDefinition{&node, scope_});
        return Flow::kNormal;
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void bind(const Node& node, Value item) {
    Value& scope = scope_->variables;
    if (node.targets.size() == 1) {
      scope[node.targets[0]] = std::move(item);
      return;
    }
    if (!item.is_array() || item.size() != node.targets.size()) {
      fail_at(node.line, "cannot unpack ", type_name(item), " into ", node.targets.size(),
              " names");
    }
    for (size_t i = 0; i < node.targets.size(); ++i) scope[node.targets[i]] = item[i];
  }

  // Runs a for loop. Its else runs as jinja2 compiles it: after the loop,
  // unless an iteration ran its body to the end (so also when every
  // iteration left by break or continue); a break or continue there is the
  // enclosing loop's, which the flow returned says.
  Flow exec_for(const Node& node, std::string& out) {
    Value scratch;
    const Value& iterable = value_of(*node.value, scratch);
    Value items = located(node.line, [&] { return apply_filter("list", iterable, {}); });
    // The filter runs before this loop's state exists: there `loop` is the
    // enclosing loop's (Note [loop]).
    if (node.filter) {
      enter_scope();
      Value kept = Value::array();
      for (const Value& item : items) {
        bind(node, item);
        if (truthy(eval(*node.filter))) kept.push_back(item);
      }
      items = std::move(kept);
      leave_scope();
    }
    const size_t n = items.size();
    const size_t loop_index = loops_.size();
    loops_.push_back(LoopState{std::move(items), 0, std::nullopt});
    bool a_body_ran_to_its_end = false;
    for (size_t i = 0; i < n; ++i) {
      // A fresh scope per iteration: what one iteration sets, the next does
      // not see (jinja2's loop scoping). The item is copied: loop.previtem
      // and loop.nextitem read the list.
      enter_scope();
      loops_[loop_index].index0 = i;
      bind(node, loops_[loop_index].items[i]);
      scope_->variables["loop"] = loop_marker(loop_index);
      const Flow flow = exec(node.body, out);
      scope_->ended_iteration = true;  // what a macro defined here sees is gone
      leave_scope();
      if (flow == Flow::kBreak) break;
      if (flow == Flow::kNormal) a_body_ran_to_its_end = true;
    }
    loops_.pop_back();
    return a_body_ran_to_its_end ? Flow::kNormal : exec(node.else_body, out);
  }

  void enter_scope() { scope_ = std::make_shared<Scope>(scope_); }
  void leave_scope() { scope_ = scope_->parent; }

  // The running loop that `e` names when it is the name `loop` bound by a
  // for loop (Note [loop]); null otherwise.
  LoopState* loop_named_by(const Expr& e) {
    if (e.kind != Expr::Kind::kName || e.name != "loop") return nullptr;
    const Value* marker = lookup_mutable(e.name);
    if (marker == nullptr || !is_loop_marker(*marker)) return nullptr;
    return &loops_.at(static_cast<size_t>(marker_handle(*marker)));
  }

  // loop.<attribute> and loop['attribute'], as jinja2's LoopContext has them
  // (without recursive loops, which the parser refuses, depth is 1).
  Value loop_attribute(const Expr& e, const LoopState& loop) {
    const Value key = e.kind == Expr::Kind::kAttribute ? Value(e.name) : eval(*e.operands[1]);
    if (!key.is_string()) fail_at(e.line, "loop has no item ", python_repr(key));
    const std::string& name = key.get_ref<const std::string&>();
    const size_t i = loop.index0, n = loop.items.size();
    if (name == "index") return i + 1;
    if (name == "index0") return i;
    if (name == "revindex") return n - i;
    if (name == "revindex0") return n - i - 1;
    if (name == "first") return i == 0;
    if (name == "last") return i + 1 == n;
    if (name == "length") return n;
    if (name == "depth") return 1;
    if (name == "depth0") return 0;
    if (name == "previtem") return i == 0 ? undefined() : loop.items[i - 1];
    if (name == "nextitem") return i + 1 == n ? undefined() : loop.items[i + 1];
    if (name == "cycle" || name == "changed") {
      fail_at(e.line, "loop.", name, " is a method; call it: loop.", name, "(...)");
    }
    fail_at(e.line, "loop has no attribute '", name,
            "' (jinja2's loop has index, index0, revindex, revindex0, first, last, length, "
            "depth, depth0, previtem, nextitem, cycle() and changed())");
  }

  // loop.cycle(...) and loop.changed(...).
  Value loop_method(const Expr& call, const std::string& name, const Arguments& args,
                    LoopState& loop) {
    if (name != "cycle" && name != "changed") {
      fail_at(call.line, "loop has no method '", name, "' (it has cycle() and changed())");
    }
    if (!args.keywords.empty()) {
      fail_at(call.line, "loop.", name, "() takes no keyword arguments");
    }
    if (name == "cycle") {
      if (args.positional.empty()) fail_at(call.line, "loop.cycle() needs items to cycle");
      return args.positional[loop.index0 % args.positional.size()];
    }
    // True on the first call and whenever the arguments differ from the
    // previous call's (jinja2 compares the argument tuples with ==).
    Value now = Value::array();
    for (const Value& arg : args.positional) now.push_back(arg);
    if (loop.last_changed && equal(*loop.last_changed, now)) return false;
    loop.last_changed = std::move(now);
    return true;
  }

  void exec_set(const Node& node, Value value) {
    if (node.attribute.empty()) {
      if (node.targets.size() == 1) {
        scope_->variables[node.targets[0]] = std::move(value);
      } else {
        bind(node, value);
      }
      return;
    }
    Value* object = lookup_mutable(node.targets[0]);
    if (object == nullptr || !object->is_object()) {
      fail_at(node.line, "cannot set attribute '", node.attribute, "' of '", node.targets[0],
              "', which is not a namespace");
    }
    (*object)[node.attribute] = std::move(value);
  }

  Value* lookup_mutable(const std::string& name) {
    for (Scope* scope = scope_.get(); scope != nullptr; scope = scope->parent.get()) {
      auto it = scope->variables.find(name);
      if (it != scope->variables.end()) return &*it;
    }
    return nullptr;
  }

  // Note [stored values]: an expression that names a stored value (a
  // variable, a key or an index of one) reads it in place, without a copy.
  // The reference is valid while no statement runs, and statements run
  // within an expression only in a macro's body (`set ns.x` there changes
  // a namespace the caller may be reading). So where an operand is held
  // while later operands are evaluated, it is held in place only when no
  // later operand has a call in it (Expr::calls); else it is copied.

  // An expression's value: the stored one itself when it names one (no
  // copy; Note [stored values]), else computed into `scratch`.
  const Value& value_of(const Expr& e, Value& scratch) {
    if (const Value* v = stored(e)) return *v;
    scratch = eval(e);
    return scratch;
  }

  // e.operands[0]'s value, to be held while the operands from 1 on and the
  // keywords are evaluated: a copy when they may run statements.
  const Value& value_held(const Expr& e, Value& scratch) {
    bool later_calls = false;
    for (size_t i = 1; i < e.operands.size(); ++i)
      later_calls = later_calls || (e.operands[i] && e.operands[i]->calls);
    for (const auto& keyword : e.keywords) later_calls = later_calls || keyword.second->calls;
    if (!later_calls) return value_of(*e.operands[0], scratch);
    scratch = eval(*e.operands[0]);
    return scratch;
  }

  // The stored value an expression names (a variable, or a key or an index
  // of one), so that reading messages[i] copies nothing; null when the
  // expression computes a new value.
  const Value* stored(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kName: {
        const Value* found = lookup_mutable(e.name);
        if (found && is_loop_marker(*found)) {
          fail_at(e.line,
                  "'loop' can only be read as loop.<attribute>, loop.cycle(...), "
                  "loop.changed(...) or with 'is defined'");
        }
        return found ? found : &undefined_value();
      }
      case Expr::Kind::kAttribute:
      case Expr::Kind::kSubscript: {
        if (loop_named_by(*e.operands[0])) return nullptr;  // computed by eval_member
        // The base would be held while the key runs statements (Note
        // [stored values]): eval_member copies it out first.
        if (e.kind == Expr::Kind::kSubscript && e.operands[1]->calls) return nullptr;
        const Value* base = stored(*e.operands[0]);
        if (base == nullptr) return nullptr;  // computed: eval_member copies it out
        require_members(e, *base);
        if (is_python_attribute(e, *base)) return &undefined_value();
        return member(*base,
                      e.kind == Expr::Kind::kAttribute ? Value(e.name) : eval(*e.operands[1]));
      }
      default:
        return nullptr;
    }
  }

  // Members of an undefined value are jinja2's UndefinedError; of a macro,
  // Python's attributes of one (name, arguments, ...), which the renderer
  // does not have.
  void require_members(const Expr& e, const Value& base) const {
    if (!is_undefined(base) && !is_macro(base)) return;
    fail_at(
        e.line, "cannot read ",
        e.kind == Expr::Kind::kAttribute ? "attribute '" + e.name + "'" : std::string("an index"),
        is_macro(base) ? " of a macro" : " of an undefined value");
  }

  // Whether base.name is a Python attribute in jinja2 rather than a key
  // (calls, base.name(...), do not come here; base['name'] reads the key).
  // The renderer has no bound methods: those are an error. The attributes
  // the sandbox makes undefined are undefined.
  bool is_python_attribute(const Expr& e, const Value& base) const {
    if (e.kind != Expr::Kind::kAttribute) return false;
    const PythonAttribute attribute = python_attribute(base, e.name);
    if (attribute == PythonAttribute::kReadable) {
      fail_at(e.line, "'.", e.name, "' on this ", type_name(base),
              " is Python's attribute in jinja2, not a key, which the renderer does not "
              "support (a method is supported as a call, .",
              e.name, "(...); a key as ['", e.name, "'])");
    }
    return attribute == PythonAttribute::kUnsafe;
  }

  // base[key] when base stores it; &undefined when it does not; null when
  // the result must be computed (a string's character).
  const Value* member(const Value& base, const Value& key) {
    if (base.is_object()) {
      if (!key.is_string()) return &undefined_value();
      auto it = base.find(key.get<std::string>());
      return it == base.end() ? &undefined_value() : &*it;
    }
    if (base.is_array() && key.is_number_integer()) {
      int64_t i = key.get<int64_t>();
      const auto n = static_cast<int64_t>(base.size());
      if (i < 0) i += n;
      return i < 0 || i >= n ? &undefined_value() : &base[static_cast<size_t>(i)];
    }
    if (base.is_string() && key.is_number_integer()) return nullptr;
    return &undefined_value();
  }

  Value eval(const Expr& e) {
    NestingGuard guard(nesting_, kMaxRenderNesting, [&] { fail_nesting(e.line); });
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return *stored(e);
      case Expr::Kind::kAttribute:
      case Expr::Kind::kSubscript:
        return eval_member(e);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Value list = Value::array();
        for (const ExprPtr& item : e.operands) list.push_back(eval(*item));
        if (e.kind == Expr::Kind::kTuple) return as_tuple(std::move(list));
        return list;
      }
      case Expr::Kind::kDict: {
        Value dict = Value::object();
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
          Value key = eval(*e.operands[i]);
          if (!key.is_string()) fail_at(e.line, "dict keys must be strings here");
          dict[key.get<std::string>()] = eval(*e.operands[i + 1]);
        }
        return dict;
      }
      case Expr::Kind::kSlice:
        return eval_slice(e);
      case Expr::Kind::kCall:
        return eval_call(e);
      case Expr::Kind::kFilter: {
        Value scratch;
        const Value& value = value_held(e, scratch);
        const Arguments args = arguments(e, 1);
        return located(e.line, [&] { return apply_filter(e.name, value, args); });
      }
      case Expr::Kind::kTest: {
        if (loop_named_by(*e.operands[0]) && (e.name == "defined" || e.name == "undefined")) {
          return (e.name == "defined") != e.negated;
        }
        Value scratch;
        const Value& value = value_held(e, scratch);
        const Arguments args = arguments(e, 1);
        const bool passed =
            located(e.line, [&] { return Value(apply_test(e.name, value, args)); }).get<bool>();
        return passed != e.negated;
      }
      case Expr::Kind::kUnary:
        return eval_unary(e);
      case Expr::Kind::kBinary:
        return eval_binary(e);
      case Expr::Kind::kCompare: {
        Value left = eval(*e.operands[0]);
        for (size_t i = 0; i < e.comparisons.size(); ++i) {
          Value right = eval(*e.operands[i + 1]);
          if (!compare(e, e.comparisons[i], left, right)) return false;
          left = std::move(right);
        }
        return true;
      }
      case Expr::Kind::kConditional:
        if (truthy(eval(*e.operands[1]))) return eval(*e.operands[0]);
        return e.operands[2] ? eval(*e.operands[2]) : undefined();
    }
    return undefined();
  }

  Value eval_member(const Expr& e) {
    if (LoopState* loop = loop_named_by(*e.operands[0])) return loop_attribute(e, *loop);
    if (const Value* item = stored(e)) return *item;
    // A string's character, or a member of a computed value.
    const Value base = eval(*e.operands[0]);
    require_members(e, base);
    if (is_python_attribute(e, base)) return undefined();
    const Value key = e.kind == Expr::Kind::kAttribute ? Value(e.name) : eval(*e.operands[1]);
    if (base.is_string() && key.is_number_integer()) {
      std::vector<std::string> cps = code_points(base.get_ref<const std::string&>());
      int64_t i = key.get<int64_t>();
      const auto n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      return i < 0 || i >= n ? undefined() : Value(cps[static_cast<size_t>(i)]);
    }
    const Value* item = member(base, key);
    return item ? *item : undefined();
  }

  Value eval_slice(const Expr& e) {
    Value scratch;
    const Value& base = value_held(e, scratch);
    auto bound = [&](size_t i) -> std::optional<int64_t> {
      if (!e.operands[i]) return std::nullopt;
      Value v = eval(*e.operands[i]);
      if (v.is_null()) return std::nullopt;
      if (!v.is_number_integer()) fail_at(e.line, "slice bounds must be integers");
      return v.get<int64_t>();
    };
    const std::optional<int64_t> start = bound(1), stop = bound(2), step_given = bound(3);
    const int64_t step = step_given.value_or(1);
    if (step == 0) fail_at(e.line, "slice step cannot be zero");
    Value items;
    if (base.is_string()) {
      items = Value::array();
      for (std::string& cp : code_points(base.get_ref<const std::string&>())) items.push_back(cp);
    } else if (base.is_array()) {
      items = base;
    } else {
      fail_at(e.line, "cannot slice ", type_name(base));
    }
    // Python's slice.indices().
    const auto n = static_cast<int64_t>(items.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
      if (!v) return fallback;
      int64_t x = *v < 0 ? *v + n : *v;
      const int64_t low = step > 0 ? 0 : -1, high = step > 0 ? n : n - 1;
      return std::clamp(x, low, high);
    };
    const int64_t from = clamp(start, step > 0 ? 0 : n - 1);
    const int64_t to = clamp(stop, step > 0 ? n : -1);
    Value out = Value::array();
    for (int64_t i = from; step > 0 ? i < to : i > to; i += step)
      out.push_back(items[static_cast<size_t>(i)]);
    if (is_tuple(base)) return as_tuple(std::move(out));
    if (!base.is_string()) return out;
    std::string text;
    for (const Value& cp : out) text += cp.get<std::string>();
    return text;
  }

  Arguments arguments(const Expr& e, size_t first) {
    Arguments args;
    for (size_t i = first; i < e.operands.size(); ++i)
      args.positional.push_back(eval(*e.operands[i]));
    for (const auto& [key, value] : e.keywords) args.keywords.emplace_back(key, eval(*value));
    return args;
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.operands[0];
    Arguments args = arguments(e, 1);
    if (callee.kind == Expr::Kind::kAttribute) {
      if (LoopState* loop = loop_named_by(*callee.operands[0])) {
        return loop_method(e, callee.name, args, *loop);
      }
      Value scratch;
      const Value& object = value_of(*callee.operands[0], scratch);
      // ns.render(...): a macro kept in a namespace or a dict's key.
      if (object.is_object() && python_attribute(object, callee.name) == PythonAttribute::kNone) {
        auto it = object.find(callee.name);
        if (it != object.end() && is_macro(*it)) return call_macro(e, *it, std::move(args));
      }
      return located(e.line, [&] { return call_method(object, callee.name, args); });
    }
    if (callee.kind == Expr::Kind::kName) {
      const Value* found = lookup_mutable(callee.name);
      if (found && is_macro(*found)) return call_macro(e, *found, std::move(args));
      return located(e.line, [&] { return call_global(callee.name, args); });
    }
    const Value target = eval(callee);
    if (!is_macro(target)) fail_at(e.line, "a ", type_name(target), " cannot be called");
    return call_macro(e, target, std::move(args));
  }

  // Renders a macro's body for one call, in a scope of its own under the
  // one it was defined in, and returns the text (jinja2 gives a str where
  // autoescape is off, as in transformers).
  Value call_macro(const Expr& call, const Value& macro, Arguments args) {
    // A copy: the body may define macros, which macros_ grows by.
    const MacroDefinition definition = macros_.at(marker_handle(macro));
    const Node& node = *definition.node;
    for (const Scope* scope = definition.scope.get(); scope; scope = scope->parent.get()) {
      // jinja2 would read the ended iteration's variables as its sentinel
      // 'missing', or the loop's later values.
      if (scope->ended_iteration)
        fail_at(call.line, "macro '", node.text,
                "' is called after the for loop iteration that defined it ended, which the "
                "renderer does not support");
    }
    if (macro_depth_ >= kMaxMacroDepth)
      fail_at(call.line, "macro calls nest more than ", kMaxMacroDepth,
              " deep (jinja2 stops near there with a RecursionError)");
    MacroArguments bound =
        located(call.line, [&] { return bind_arguments(node, std::move(args)); });
    const std::shared_ptr<Scope> caller_scope = std::exchange(
        scope_, std::make_shared<Scope>(definition.scope, std::move(bound.variables)));
    // Defaults are evaluated now, in order, in the macro's scope: one sees
    // the parameters before and after it (jinja2's function arguments).
    const size_t first_default = node.targets.size() - node.defaults.size();
    for (size_t i : bound.missing) {
      if (i >= first_default)
        scope_->variables[node.targets[i]] = eval(*node.defaults[i - first_default]);
    }
    ++macro_depth_;
    std::string out;
    exec(node.body, out);  // break and continue cannot leave a macro (the parser refuses them)
    --macro_depth_;
    scope_ = caller_scope;
    return out;
  }

  Value eval_unary(const Expr& e) {
    const Value v = eval(*e.operands[0]);
    if (e.name == "not") return !truthy(v);
    if (!v.is_number()) fail_at(e.line, "unary ", e.name, " needs a number, found ", type_name(v));
    if (e.name == "+") return v;
    if (v.is_number_integer()) return -v.get<int64_t>();
    return -v.get<double>();
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and" || op == "or") {
      Value left = eval(*e.operands[0]);
      if (truthy(left) == (op == "or")) return left;
      return eval(*e.operands[1]);
    }
    Value scratch_a, scratch_b;
    const Value& a = value_held(e, scratch_a);
    const Value& b = value_of(*e.operands[1], scratch_b);
    if (op == "~") return to_text(a) + to_text(b);
    if (is_comparison(op)) return compare(e, op, a, b);
    return located(e.line, [&] { return arithmetic(op, a, b); });
  }

  // a op b for one comparison operator (is_comparison).
  bool compare(const Expr& e, const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in" || op == "not in") {
      Arguments container;
      container.positional.push_back(b);
      if (is_undefined(b)) fail_at(e.line, "'in' an undefined value");
      const bool found =
          located(e.line, [&] { return Value(apply_test("in", a, container)); }).get<bool>();
      return found == (op == "in");
    }
    return located(e.line,
                   [&] {
                     if (op == "<") return Value(less(a, b));
                     if (op == ">") return Value(less(b, a));
                     if (op == "<=") return Value(!less(b, a));
                     return Value(!less(a, b));
                   })
        .get<bool>();
  }

  const std::string& name_;
  std::shared_ptr<Scope> scope_;  // the innermost scope
  // The running for loops, outermost first; a deque, so that a loop's state
  // stays in place while a macro called in its body runs loops of its own.
  std::deque<LoopState> loops_;
  std::vector<MacroDefinition> macros_;  // every {% macro %} run so far
  int macro_depth_ = 0;                  // macro calls running
  int nesting_ = 0;                      // statements and expressions running
  Value scratch_;                        // {{ output }}'s value when computed
};

}  // namespace

namespace {

// jinja2 drops one newline at the very end of a template
// (keep_trailing_newline=False).
std::string_view without_trailing_newline(std::string_view source) {
  if (source.ends_with("\r\n")) return source.substr(0, source.size() - 2);
  if (source.ends_with('\n') || source.ends_with('\r')) return source.substr(0, source.size() - 1);
  return source;
}

}  // namespace

Template::Template(std::string_view source, std::string source_name)
    : source_name_(std::move(source_name)),
      body_(std::make_shared<const Body>(
          parse(lex(without_trailing_newline(source), source_name_), source_name_))) {}

std::string Template::render(Value variables) const {
  return Renderer(source_name_, std::move(variables)).run(*body_);
}

}  // namespace lt::data::jinja
