#include "data/jinja_macro.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace lt::data::jinja {

MacroArguments bind_arguments(const Node& macro, Arguments args) {
  const std::vector<std::string>& parameters = macro.targets;
  MacroArguments bound{Value::object(), {}};
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (i < args.positional.size()) {
      bound.variables[parameters[i]] = std::move(args.positional[i]);
      continue;
    }
    auto given = std::find_if(args.keywords.begin(), args.keywords.end(),
                              [&](const auto& keyword) { return keyword.first == parameters[i]; });
    if (given == args.keywords.end()) {
      bound.variables[parameters[i]] = undefined();
      bound.missing.push_back(i);
    } else {
      bound.variables[parameters[i]] = std::move(given->second);
      args.keywords.erase(given);
    }
  }
  // jinja2 checks the keyword arguments first.
  if (macro.takes_kwargs) {
    Value kwargs = Value::object();
    for (auto& [name, value] : args.keywords) kwargs[name] = std::move(value);
    bound.variables["kwargs"] = std::move(kwargs);
  } else if (!args.keywords.empty()) {
    fail("macro '", macro.text, "' takes no keyword argument '", args.keywords.front().first, "'");
  }
  if (macro.takes_varargs) {
    Value varargs = Value::array();
    for (size_t i = parameters.size(); i < args.positional.size(); ++i)
      varargs.push_back(std::move(args.positional[i]));
    bound.variables["varargs"] = as_tuple(std::move(varargs));
  } else if (args.positional.size() > parameters.size()) {
    fail("macro '", macro.text, "' takes not more than ", parameters.size(), " argument(s)");
  }
  return bound;
}

}  // namespace lt::data::jinja
