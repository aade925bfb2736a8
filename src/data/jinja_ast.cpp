#include "data/jinja_ast.h"

namespace lt::data::jinja {

namespace {

void for_each_name(const Expr& e, const std::function<void(const std::string&)>& f) {
  if (e.kind == Expr::Kind::kName) f(e.name);
  for (const ExprPtr& operand : e.operands) {
    if (operand) for_each_name(*operand, f);
  }
  for (const auto& keyword : e.keywords) for_each_name(*keyword.second, f);
}

}  // namespace

void walk(Body& body, const std::function<void(const std::string&)>& bind,
          const std::function<void(Expr&)>& read) {
  for (Node& node : body) {
    switch (node.kind) {
      case Node::Kind::kOutput:
        read(*node.value);
        break;
      case Node::Kind::kIf:
        for (auto& [condition, branch] : node.branches) {
          if (condition) read(*condition);
          walk(branch, bind, read);
        }
        break;
      case Node::Kind::kFor:
        for (const std::string& target : node.targets) bind(target);
        read(*node.value);
        walk(node.body, bind, read);
        walk(node.else_body, bind, read);
        if (node.filter) read(*node.filter);
        break;
      case Node::Kind::kSet:
        // `set ns.x = ...` binds no name: jinja2 reads it as a namespace
        // reference, neither a load nor a store of `ns`.
        if (node.attribute.empty()) {
          for (const std::string& target : node.targets) bind(target);
        }
        read(*node.value);
        break;
      case Node::Kind::kSetBlock:
        bind(node.targets[0]);
        walk(node.body, bind, read);
        break;
      case Node::Kind::kMacro:
        for (const std::string& parameter : node.targets) bind(parameter);
        for (ExprPtr& value : node.defaults) read(*value);
        walk(node.body, bind, read);
        break;
      case Node::Kind::kText:
      case Node::Kind::kBreak:
      case Node::Kind::kContinue:
        break;
    }
  }
}

bool note_calls(Expr& e) {
  e.calls = e.kind == Expr::Kind::kCall;
  for (ExprPtr& operand : e.operands) {
    if (operand && note_calls(*operand)) e.calls = true;
  }
  for (auto& keyword : e.keywords) {
    if (note_calls(*keyword.second)) e.calls = true;
  }
  return e.calls;
}

std::set<std::string> read_before_bound(Body& body, std::set<std::string> names) {
  // jinja2's UndeclaredNameVisitor: a read of a name still looked for counts
  // (and it stays looked for); any binding of it first stops the search.
  std::set<std::string> read;
  walk(
      body, [&](const std::string& name) { names.erase(name); },
      [&](Expr& e) {
        for_each_name(e, [&](const std::string& name) {
          if (names.count(name)) read.insert(name);
        });
      });
  return read;
}

}  // namespace lt::data::jinja
