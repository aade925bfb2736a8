#pragma once
// How a call's arguments bind to a macro's parameters, as jinja2's
// Macro.__call__ binds them: positional arguments first, then keyword
// arguments for the parameters left; a parameter given neither takes its
// default (jinja_template.cpp evaluates it) or is undefined. Extra
// positional arguments go to `varargs` and extra keyword arguments to
// `kwargs` where the body reads them (Node::takes_varargs, takes_kwargs);
// otherwise they are jinja2's TypeError, an lt::Error here. A keyword
// argument for a parameter already given by position is an extra one.
#include <vector>

#include "data/jinja_ast.h"
#include "data/jinja_builtins.h"
#include "data/jinja_value.h"

namespace lt::data::jinja {

struct MacroArguments {
  // The macro scope's first variables: each parameter (undefined where not
  // given), and varargs (a tuple) and kwargs (a dict) where taken.
  Value variables;
  std::vector<size_t> missing;  // the parameters not given, in order
};

MacroArguments bind_arguments(const Node& macro, Arguments args);

}  // namespace lt::data::jinja
