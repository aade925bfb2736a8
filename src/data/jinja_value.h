#pragma once
// The values a chat template computes with, and how Python (where
// transformers renders templates with jinja2) prints and compares them.
//
// A value is a JSON value in insertion order (Python dicts keep theirs), plus
// "undefined": a name or key that does not exist, which jinja2 prints as ""
// and treats as false. Undefined is stored as nlohmann's `discarded` kind,
// which no parsed JSON ever holds.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace lt::data::jinja {

// Note [tuples]: Python tells a tuple from a list: (1, 2) prints so, (1,)
// with its comma, a tuple never equals a list, and adding one to the other
// is a TypeError. An array value's storage is this vector, which also says
// whether it is a tuple (a tuple literal, a macro's varargs, the pairs of
// the items filter); copies keep the mark, an array built any other way is
// a list.
template <typename T, typename Allocator = std::allocator<T>>
class Sequence : public std::vector<T, Allocator> {
 public:
  using std::vector<T, Allocator>::vector;
  bool is_tuple = false;
};

using Value = nlohmann::basic_json<nlohmann::ordered_map, Sequence>;

// `items`, an array, as a tuple or as a list (Note [tuples]).
Value as_tuple(Value items);
Value as_list(Value items);
bool is_tuple(const Value& value);

// Note [markers]: what only a rendering makes, a running for loop's `loop`
// and a macro, is a binary value, which no parsed JSON holds: its subtype
// is the renderer's handle for it, its bytes say which it is. A macro
// prints as jinja2's does ("<Macro 'name'>") and is equal only to itself.
Value loop_marker(uint64_t handle);
Value macro_value(std::string_view name, uint64_t handle);
bool is_loop_marker(const Value& value);
bool is_macro(const Value& value);
uint64_t marker_handle(const Value& marker);

// What the template's raise_exception() throws: the template refusing what
// it was given (Gemma's "System role not supported"), an error of the data,
// not of the template, which callers name the row for.
class TemplateRaised : public Error {
 public:
  using Error::Error;
};

Value undefined();
bool is_undefined(const Value& value);

// Python's bool(): empty strings, lists and dicts, 0, None, False and
// undefined are false.
bool truthy(const Value& value);

// What {{ value }} writes: str(value) ("None", "True", Python's repr of
// lists and dicts), "" for undefined.
std::string to_text(const Value& value);
// Python's repr(): strings quoted, the rest as to_text.
std::string python_repr(const Value& value);
// How transformers' tojson filter calls json.dumps: tojson(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False).
struct JsonStyle {
  bool ensure_ascii = false;          // non-ASCII as \uXXXX (surrogate pairs past U+FFFF)
  std::optional<std::string> indent;  // each level's prefix; none: one line
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};
// json.dumps(value, ...) with `style`; without separators, Python's
// (", " and ": " on one line, "," and ": " with an indent).
std::string to_json(const Value& value, const JsonStyle& style = {});

// Python's == and ordering (numbers compare by value across int and float,
// True == 1); ordering values Python cannot order is an lt::Error.
bool equal(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

// Python's a op b for the arithmetic operators + - * / // % **: numbers
// (int stays int where Python's does), string and list concatenation, and
// repetition by an integer; an lt::Error where Python raises (a string
// plus a number, division by zero).
Value arithmetic(std::string_view op, const Value& a, const Value& b);

// A short name for error messages: "string", "list", "tuple", "macro",
// "undefined", ...
std::string type_name(const Value& value);

}  // namespace lt::data::jinja
