#include "data/jinja_builtins.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/jinja_numbers.h"
#include "data/jinja_strings.h"

namespace lt::data::jinja {

const Value* Arguments::get(size_t index, std::string_view keyword) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [name, value] : keywords) {
    if (name == keyword) return &value;
  }
  return nullptr;
}

namespace {

const std::string& need_string(const Value& value, std::string_view what) {
  if (!value.is_string()) fail(what, ": expected a string, found ", type_name(value));
  return value.get_ref<const std::string&>();
}

int64_t need_integer(const Value& value, std::string_view what) {
  if (!value.is_number_integer()) fail(what, ": expected an integer, found ", type_name(value));
  return value.get<int64_t>();
}

std::optional<std::string> optional_string(const Arguments& args, size_t index,
                                           std::string_view keyword, std::string_view what) {
  const Value* v = args.get(index, keyword);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return need_string(*v, what);
}

// Items of anything a for loop or a list filter walks, as a list: list and
// tuple items, dict keys, string code points; undefined is empty (jinja2's
// Undefined).
Value items_of(const Value& value, std::string_view what) {
  if (value.is_array()) return as_list(value);
  Value list = Value::array();
  if (is_undefined(value)) return list;
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) list.push_back(it.key());
    return list;
  }
  if (value.is_string()) {
    for (std::string& cp : code_points(value.get_ref<const std::string&>())) list.push_back(cp);
    return list;
  }
  fail(what, ": ", type_name(value), " is not iterable");
}

// What select, reject, selectattr, rejectattr and map go over: jinja2's
// guard them with `if value:`, so none (tools when none are given) or an
// empty string is an empty sequence, not an error.
Value items_if_any(const Value& value, std::string_view what) {
  return truthy(value) ? items_of(value, what) : Value::array();
}

Value length_of(const Value& value) {
  if (value.is_string()) return code_point_count(value.get_ref<const std::string&>());
  if (value.is_array() || value.is_object()) return value.size();
  if (is_undefined(value)) return 0;
  fail("length: ", type_name(value), " has no length");
}

// jinja2's attribute lookup for map/selectattr: "a.b" walks dicts.
Value attribute_of(const Value& value, const std::string& path) {
  Value current = value;
  for (const std::string& part : split(path, std::string("."), -1)) {
    if (!current.is_object() || !current.contains(part)) return undefined();
    current = current[part];
  }
  return current;
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test,
// args...): the test's arguments follow its name.
Value select_items(const Value& value, const Arguments& args, bool by_attribute, bool keep) {
  Value out = Value::array();
  const size_t test_at = by_attribute ? 1 : 0;
  Arguments test_args;
  for (size_t i = test_at + 1; i < args.positional.size(); ++i) {
    test_args.positional.push_back(args.positional[i]);
  }
  for (const Value& item : items_if_any(value, "select")) {
    Value subject = item;
    if (by_attribute) {
      const Value* attribute = args.get(0, "attribute");
      if (attribute == nullptr) fail("selectattr: the attribute is missing");
      subject = attribute_of(item, need_string(*attribute, "selectattr"));
    }
    const Value* test = args.get(test_at, "");
    const bool passed = test == nullptr
                            ? truthy(subject)
                            : apply_test(need_string(*test, "select"), subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return out;
}

Value join(const Value& value, const Arguments& args) {
  const Value* sep_value = args.get(0, "d");
  const std::string sep = sep_value ? need_string(*sep_value, "join") : "";
  const Value* attribute = args.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : items_of(value, "join")) {
    if (!first) out += sep;
    first = false;
    out += to_text(attribute ? attribute_of(item, need_string(*attribute, "join")) : item);
  }
  return out;
}

// jinja2's int filter: int(value) (int(value, base) for a string), else
// int(float(value)), else `default` (0); an infinite float is an error, as
// Python's OverflowError is outside what the filter catches.
Value to_integer(const Value& value, const Arguments& args) {
  const Value* fallback = args.get(0, "default");
  const Value* base_value = args.get(1, "base");
  const Value otherwise = fallback ? *fallback : Value(0);
  if (is_undefined(value)) fail("int: the value is undefined");
  const auto truncate = [&](double x) -> Value {
    if (std::isnan(x)) return otherwise;
    LT_CHECK(x >= -0x1p63 && x < 0x1p63, "int: ", python_repr(value), " does not fit in 64 bits");
    return static_cast<int64_t>(x);
  };
  if (value.is_number_integer()) return value;
  if (value.is_boolean()) return value.get<bool>() ? 1 : 0;
  if (value.is_number_float()) {
    LT_CHECK(!std::isinf(value.get<double>()), "int: cannot convert float infinity to integer");
    return truncate(value.get<double>());
  }
  if (!value.is_string()) return otherwise;  // None, lists, dicts: TypeError twice
  const std::string& text = value.get_ref<const std::string&>();
  // A base that is not an integer is Python's TypeError: the float path.
  const bool integer_base = !base_value || base_value->is_number_integer();
  const int64_t base = base_value && integer_base ? base_value->get<int64_t>() : 10;
  if (integer_base)
    if (const auto as_int = python_int(text, base)) return *as_int;
  const auto as_float = python_float(text);
  if (!as_float || std::isinf(*as_float)) return otherwise;
  return truncate(*as_float);
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), its arguments as json.dumps reads them.
JsonStyle json_style(const Arguments& args) {
  JsonStyle style;
  if (const Value* v = args.get(0, "ensure_ascii")) style.ensure_ascii = truthy(*v);
  if (const Value* v = args.get(1, "indent"); v && !v->is_null()) {
    if (v->is_string()) {
      style.indent = v->get<std::string>();
    } else {  // json.dumps: ' ' * indent (none for 0 or less, lines still broken)
      const int64_t spaces =
          v->is_boolean() ? (v->get<bool>() ? 1 : 0) : need_integer(*v, "tojson: indent");
      style.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, spaces)), ' ');
    }
  }
  if (const Value* v = args.get(2, "separators"); v && !v->is_null()) {
    // Any two strings Python unpacks: a pair, or a string of two characters.
    const Value pair = items_of(*v, "tojson: separators");
    if (pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      fail("tojson: separators must be two strings (item, key), found ", python_repr(*v));
    style.separators.emplace(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  if (const Value* v = args.get(3, "sort_keys")) style.sort_keys = truthy(*v);
  return style;
}

}  // namespace

Value apply_filter(std::string_view name, const Value& value, const Arguments& args) {
  if (name == "trim") {
    return strip(need_string(value, "trim"), optional_string(args, 0, "chars", "trim"),
                 StripSide::kBoth);
  }
  if (name == "length" || name == "count") return length_of(value);
  if (name == "tojson") return to_json(value, json_style(args));
  if (name == "upper") return upper(need_string(value, "upper"));
  if (name == "lower") return lower(need_string(value, "lower"));
  if (name == "title") return jinja_title(need_string(value, "title"));
  if (name == "capitalize") return capitalize(need_string(value, "capitalize"));
  if (name == "default" || name == "d") {
    const Value* fallback = args.get(0, "default_value");
    const Value* boolean = args.get(1, "boolean");
    const bool use_fallback =
        is_undefined(value) || (boolean && truthy(*boolean) && !truthy(value));
    if (!use_fallback) return value;
    return fallback ? *fallback : Value("");
  }
  if (name == "first" || name == "last") {
    Value list = items_of(value, name);
    if (list.empty()) return undefined();
    return name == "first" ? list.front() : list.back();
  }
  if (name == "join") return join(value, args);
  if (name == "string") return to_text(value);
  if (name == "list") return items_of(value, "list");
  if (name == "items") {
    if (is_undefined(value)) return Value::array();
    if (!value.is_object()) fail("items: expected a mapping, found ", type_name(value));
    Value out = Value::array();
    for (auto it = value.begin(); it != value.end(); ++it)
      out.push_back(as_tuple(Value::array({it.key(), it.value()})));
    return out;
  }
  if (name == "replace") {
    const Value* old = args.get(0, "old");
    const Value* with = args.get(1, "new");
    const Value* count = args.get(2, "count");
    if (!old || !with) fail("replace: expected (old, new)");
    return replace(to_text(value), need_string(*old, "replace"), need_string(*with, "replace"),
                   count && !count->is_null() ? need_integer(*count, "replace") : -1);
  }
  if (name == "reverse") {
    if (value.is_string()) {
      std::vector<std::string> cps = code_points(value.get_ref<const std::string&>());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return out;
    }
    Value list = items_of(value, "reverse");
    std::reverse(list.begin(), list.end());
    return list;
  }
  if (name == "unique") {
    Value out = Value::array();
    for (const Value& item : items_of(value, "unique")) {
      const bool seen =
          std::any_of(out.begin(), out.end(), [&](const Value& v) { return equal(v, item); });
      if (!seen) out.push_back(item);
    }
    return out;
  }
  if (name == "map") {
    Value out = Value::array();
    const Value* attribute = args.get(99, "attribute");
    for (const Value& item : items_if_any(value, "map")) {
      if (attribute) {
        out.push_back(attribute_of(item, need_string(*attribute, "map")));
      } else {
        const Value* filter = args.get(0, "");
        if (!filter) fail("map: expected a filter name or attribute=");
        Arguments rest;
        rest.positional.assign(args.positional.begin() + 1, args.positional.end());
        out.push_back(apply_filter(need_string(*filter, "map"), item, rest));
      }
    }
    return out;
  }
  if (name == "select" || name == "reject")
    return select_items(value, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") {
    return select_items(value, args, true, name == "selectattr");
  }
  if (name == "safe") return value;
  if (name == "int") return to_integer(value, args);
  if (name == "float") {  // jinja2: float(value), else `default` (0.0)
    const Value* fallback = args.get(0, "default");
    if (is_undefined(value)) fail("float: the value is undefined");
    if (value.is_number()) return value.get<double>();
    if (value.is_boolean()) return value.get<bool>() ? 1.0 : 0.0;
    if (value.is_string())
      if (const auto x = python_float(value.get_ref<const std::string&>())) return *x;
    return fallback ? *fallback : Value(0.0);
  }
  if (name == "abs") {
    if (value.is_number_integer()) return std::llabs(value.get<int64_t>());
    if (value.is_number_float()) return std::fabs(value.get<double>());
    fail("abs: expected a number, found ", type_name(value));
  }
  fail("unsupported filter '", name, "'");
}

bool apply_test(std::string_view name, const Value& value, const Arguments& args) {
  auto argument = [&]() -> const Value& {
    const Value* v = args.get(0, "");
    if (v == nullptr) fail("test '", name, "' needs an argument");
    return *v;
  };
  if (name == "defined") return !is_undefined(value);
  if (name == "undefined") return is_undefined(value);
  if (name == "none") return value.is_null();
  if (name == "true") return value.is_boolean() && value.get<bool>();
  if (name == "false") return value.is_boolean() && !value.get<bool>();
  if (name == "boolean") return value.is_boolean();
  if (name == "callable") return is_macro(value);  // no other value the renderer makes is one
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_object();
  if (name == "number") return value.is_number();
  if (name == "integer") return value.is_number_integer();
  if (name == "float") return value.is_number_float();
  if (name == "iterable") return value.is_array() || value.is_object() || value.is_string();
  if (name == "sequence") return value.is_array() || value.is_object() || value.is_string();
  if (name == "even" || name == "odd") {
    const int64_t n = need_integer(value, name);
    return (n % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") return need_integer(value, name) % need_integer(argument(), name) == 0;
  if (name == "eq" || name == "equalto" || name == "==") return equal(value, argument());
  if (name == "ne" || name == "!=") return !equal(value, argument());
  if (name == "lt" || name == "<") return less(value, argument());
  if (name == "gt" || name == ">") return less(argument(), value);
  if (name == "le" || name == "<=") return !less(argument(), value);
  if (name == "ge" || name == ">=") return !less(value, argument());
  if (name == "sameas") return value.type() == argument().type() && equal(value, argument());
  if (name == "in") {
    const Value& container = argument();
    if (container.is_string() && value.is_string()) {
      return container.get_ref<const std::string&>().find(value.get_ref<const std::string&>()) !=
             std::string::npos;
    }
    if (container.is_object())
      return value.is_string() && container.contains(value.get<std::string>());
    for (const Value& item : items_of(container, "in")) {
      if (equal(item, value)) return true;
    }
    return false;
  }
  fail("unsupported test '", name, "'");
}

Value call_method(const Value& object, std::string_view name, const Arguments& args) {
  if (object.is_string()) {
    const std::string& text = object.get_ref<const std::string&>();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const StripSide side = name == "strip"    ? StripSide::kBoth
                             : name == "lstrip" ? StripSide::kLeft
                                                : StripSide::kRight;
      return strip(text, optional_string(args, 0, "chars", name), side);
    }
    if (name == "startswith" || name == "endswith") {
      const Value* arg = args.get(0, "");
      if (arg == nullptr) fail(name, ": expected an argument");
      // Python's take a string or a tuple of strings (a list is a TypeError).
      Value candidates = is_tuple(*arg) ? *arg : Value::array({*arg});
      for (const Value& c : candidates) {
        const std::string& s = need_string(c, name);
        if (name == "startswith" ? text.starts_with(s) : text.ends_with(s)) return true;
      }
      return false;
    }
    if (name == "split" || name == "rsplit") {
      const Value* max = args.get(1, "maxsplit");
      const int64_t max_split = max ? need_integer(*max, name) : -1;
      if (name == "rsplit" && max_split >= 0) fail("rsplit with maxsplit is not supported");
      Value out = Value::array();
      for (std::string& part : split(text, optional_string(args, 0, "sep", name), max_split)) {
        out.push_back(std::move(part));
      }
      return out;
    }
    if (name == "upper") return upper(text);
    if (name == "lower") return lower(text);
    if (name == "title") return title(text);
    if (name == "capitalize") return capitalize(text);
    if (name == "replace") return apply_filter("replace", object, args);
    if (name == "find") {
      const size_t at = text.find(need_string(*args.get(0, "sub"), "find"));
      if (at == std::string::npos) return -1;
      return code_point_count(std::string_view(text).substr(0, at));
    }
    if (name == "count") {
      const std::string& sub = need_string(*args.get(0, "sub"), "count");
      if (sub.empty()) return code_point_count(text) + 1;
      int64_t n = 0;
      for (size_t at = text.find(sub); at != std::string::npos;
           at = text.find(sub, at + sub.size()))
        ++n;
      return n;
    }
    if (name == "join") {
      Arguments join_args;
      join_args.positional.push_back(object);
      return apply_filter("join", *args.get(0, "iterable"), join_args);
    }
  }
  if (object.is_object()) {
    if (name == "items") return apply_filter("items", object, {});
    if (name == "keys") return items_of(object, "keys");
    if (name == "values") {
      Value out = Value::array();
      for (auto it = object.begin(); it != object.end(); ++it) out.push_back(it.value());
      return out;
    }
    if (name == "get") {
      const Value* key = args.get(0, "key");
      if (key == nullptr) fail("get: expected a key");
      const Value* fallback = args.get(1, "default");
      if (key->is_string() && object.contains(key->get<std::string>())) {
        return object[key->get<std::string>()];
      }
      return fallback ? *fallback : Value(nullptr);
    }
  }
  fail(type_name(object), " has no method '", name, "'");
}

Value call_global(std::string_view name, const Arguments& args) {
  if (name == "raise_exception")
    throw TemplateRaised("the template raised an error: " +
                         (args.positional.empty() ? std::string() : to_text(args.positional[0])));
  if (name == "namespace" || name == "dict") {
    Value object = Value::object();
    for (const Value& positional : args.positional) {
      if (!positional.is_object()) fail(name, ": expected keyword arguments or a mapping");
      for (auto it = positional.begin(); it != positional.end(); ++it)
        object[it.key()] = it.value();
    }
    for (const auto& [key, value] : args.keywords) object[key] = value;
    return object;
  }
  if (name == "range") {
    std::vector<int64_t> bounds;
    for (const Value& v : args.positional) bounds.push_back(need_integer(v, "range"));
    if (bounds.empty() || bounds.size() > 3) fail("range: expected 1 to 3 integers");
    const int64_t start = bounds.size() > 1 ? bounds[0] : 0;
    const int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
    const int64_t step = bounds.size() > 2 ? bounds[2] : 1;
    if (step == 0) fail("range: step must not be zero");
    // jinja2's sandbox, which transformers renders templates in, refuses a
    // range of more than MAX_RANGE items (a template looping 1e8 times ran
    // for minutes and took gigabytes here).
    constexpr int64_t kMaxRange = 100000;
    const __int128 wide_step = step;
    const __int128 stride = wide_step > 0 ? wide_step : -wide_step;
    const __int128 span =
        wide_step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
    const __int128 items = span <= 0 ? 0 : (span + stride - 1) / stride;
    if (items > kMaxRange)
      fail("range: ", static_cast<double>(items), " items, more than the ", kMaxRange,
           " a template may make (as in jinja2's sandbox)");
    Value out = Value::array();
    // Counted, not stepped: start + step can leave int64 near its ends.
    for (__int128 k = 0; k < items; ++k) out.push_back(static_cast<int64_t>(start + k * wide_step));
    return out;
  }
  fail("unknown function '", name, "'");
}

PythonAttribute python_attribute(const Value& object, std::string_view name) {
  // dir() of Python 3.11's types without the dunders, plus int.is_integer
  // (3.12); the unsafe ones are jinja2's ImmutableSandboxedEnvironment's.
  static constexpr std::string_view kStr[] = {
      "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
      "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
      "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
      "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
      "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
      "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
      "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
      "swapcase",     "title",       "translate", "upper",      "zfill"};
  static constexpr std::string_view kList[] = {"copy", "count", "index"};
  static constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                                     "pop",    "remove", "reverse", "sort"};
  static constexpr std::string_view kDict[] = {"copy",  "fromkeys", "get",
                                               "items", "keys",     "values"};
  static constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault",
                                                     "update"};
  static constexpr std::string_view kNumber[] = {
      "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator",
      "from_bytes",       "fromhex",   "hex",        "imag",      "is_integer",
      "numerator",        "real",      "to_bytes"};
  auto listed = [&](const auto& names) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
  };
  if (is_undefined(object)) return PythonAttribute::kNone;
  if (name.size() > 4 && name.starts_with("__") && name.ends_with("__"))
    return PythonAttribute::kUnsafe;
  bool readable = false, unsafe = false;
  if (object.is_string()) readable = listed(kStr);
  if (object.is_array()) readable = listed(kList), unsafe = listed(kListUnsafe);
  if (object.is_object()) readable = listed(kDict), unsafe = listed(kDictUnsafe);
  if (object.is_number() || object.is_boolean()) readable = listed(kNumber);
  if (unsafe) return PythonAttribute::kUnsafe;
  return readable ? PythonAttribute::kReadable : PythonAttribute::kNone;
}

}  // namespace lt::data::jinja
