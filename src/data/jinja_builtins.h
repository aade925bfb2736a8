#pragma once
// What a chat template can call: jinja2's filters and tests, Python's str,
// dict and list methods, and the globals transformers defines.
//
// Filters: abs, capitalize, count, d/default, first, float, int, items,
// join, last, length, list, lower, map, reject, rejectattr, replace,
// reverse, safe, select, selectattr, string, title, tojson (transformers'
// own: json.dumps with ensure_ascii=False), trim, unique, upper.
// Tests: boolean, callable (a macro), defined, divisibleby, eq/equalto/==,
// even, false, float, ge, gt, in, integer, iterable, le, lt, mapping, ne,
// none, number, odd, sameas, sequence, string, true, undefined.
// Methods: str: capitalize, count, endswith, find, join, lower, lstrip,
// replace, rsplit (without maxsplit), rstrip, split, startswith, strip,
// title, upper; dict: get, items, keys, values.
// Globals: namespace, range, dict, raise_exception. strftime_now is not
// defined: templates then use their fixed fallback date (Llama 3.x's "26 Jul
// 2024"), so that a dataset renders the same on every day it is read.
//
// Anything else is an lt::Error saying what is unsupported; the caller adds
// the template's name and line.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/jinja_value.h"

namespace lt::data::jinja {

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `index` or named `keyword`; null when not given.
  const Value* get(size_t index, std::string_view keyword) const;
};

Value apply_filter(std::string_view name, const Value& value, const Arguments& args);
bool apply_test(std::string_view name, const Value& value, const Arguments& args);
Value call_method(const Value& object, std::string_view name, const Arguments& args);
// `raise_exception` throws an lt::Error with the template's message.
Value call_global(std::string_view name, const Arguments& args);

// What Python's getattr finds as `name` on `object`: jinja2 reads
// `object.name` from there before it tries a key, so `message.items` is a
// bound method, never message['items']. transformers' sandbox turns the
// unsafe ones (dunders, and the methods that change a list or dict) into an
// undefined value instead.
enum class PythonAttribute {
  kNone,      // not an attribute: jinja2 reads the key
  kReadable,  // a str/list/dict method, an int or float attribute (bool is an int)
  kUnsafe,    // undefined in the sandbox
};
PythonAttribute python_attribute(const Value& object, std::string_view name);

}  // namespace lt::data::jinja
