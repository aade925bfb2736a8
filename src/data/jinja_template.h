#pragma once
// A chat template in the Jinja subset real models ship, read once and
// rendered many times: what transformers' apply_chat_template renders with
// jinja2 (trim_blocks, lstrip_blocks, loop controls; jinja_lexer.h,
// jinja_parser.h and jinja_builtins.h list what is supported).
//
// Scoping is jinja2's: each iteration of a for loop has its own scope, so a
// `set` inside it is gone at the next iteration and after the loop;
// namespace() objects are how templates carry values out, and
// `set ns.x = ...` changes the one they name. A macro's call has its own
// scope too, under the scope the macro was defined in (not its caller's),
// whose variables it reads as they are at the call; it returns its text.
// jinja2's argument rules hold: defaults evaluated at each call, varargs
// and kwargs where the body reads them, a TypeError (an lt::Error here)
// for too many arguments or an unknown keyword. Reading a macro's
// attributes, `caller` ({% call %}) and calling a macro after the loop
// iteration that defined it ended are errors. `loop` has jinja2's index,
// index0, revindex, revindex0, first, last, length, depth, depth0, previtem,
// nextitem, cycle() and changed(); any other use of it is an error.
// Comparisons chain as in Python (`a < b < c`). `d.name` is a Python
// attribute before it is a key, as in jinja2 and transformers' sandbox.
#include <memory>
#include <string>
#include <string_view>

#include "data/jinja_ast.h"
#include "data/jinja_value.h"

namespace lt::data::jinja {

class Template {
 public:
  // A syntax error or an unsupported construct is an lt::Error naming
  // `source_name` (the file the template came from) and the line.
  Template(std::string_view source, std::string source_name);

  // `variables` is an object: messages, add_generation_prompt, bos_token,
  // ... An error while rendering (raise_exception, adding a string to a
  // number, an unsupported filter) is an lt::Error naming the file and
  // line. Thread-safe.
  std::string render(Value variables) const;

  const std::string& source_name() const { return source_name_; }

 private:
  std::string source_name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace lt::data::jinja
