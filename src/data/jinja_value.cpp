#include "data/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "data/unicode.h"

namespace lt::data::jinja {

Value undefined() {
  return Value(Value::value_t::discarded);
}

bool is_undefined(const Value& value) {
  return value.is_discarded();
}

namespace {

Value marked(Value items, bool tuple) {
  if (!items.is_array()) fail("expected a list or tuple, found ", type_name(items));
  items.get_ref<Value::array_t&>().is_tuple = tuple;
  return items;
}

}  // namespace

Value as_tuple(Value items) {
  return marked(std::move(items), true);
}

Value as_list(Value items) {
  return marked(std::move(items), false);
}

bool is_tuple(const Value& value) {
  return value.is_array() && value.get_ref<const Value::array_t&>().is_tuple;
}

namespace {

// The first byte of a marker's bytes (Note [markers]); a macro's name follows.
constexpr uint8_t kLoopMarker = 'L';
constexpr uint8_t kMacroMarker = 'M';

bool is_marker(const Value& value, uint8_t kind) {
  if (!value.is_binary()) return false;
  const Value::binary_t& bytes = value.get_binary();
  return !bytes.empty() && bytes.front() == kind;
}

std::string macro_name(const Value& macro) {
  const Value::binary_t& bytes = macro.get_binary();
  return std::string(bytes.begin() + 1, bytes.end());
}

}  // namespace

Value loop_marker(uint64_t handle) {
  return Value::binary({kLoopMarker}, handle);
}

Value macro_value(std::string_view name, uint64_t handle) {
  Value::binary_t::container_type bytes{kMacroMarker};
  bytes.insert(bytes.end(), name.begin(), name.end());
  return Value::binary(std::move(bytes), handle);
}

bool is_loop_marker(const Value& value) {
  return is_marker(value, kLoopMarker);
}

bool is_macro(const Value& value) {
  return is_marker(value, kMacroMarker);
}

uint64_t marker_handle(const Value& marker) {
  return marker.get_binary().subtype();
}

bool truthy(const Value& value) {
  switch (value.type()) {
    case Value::value_t::null:
    case Value::value_t::discarded:
      return false;
    case Value::value_t::boolean:
      return value.get<bool>();
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned:
      return value.get<int64_t>() != 0;
    case Value::value_t::number_float:
      return value.get<double>() != 0.0;
    case Value::value_t::string:
      return !value.get_ref<const std::string&>().empty();
    case Value::value_t::array:
    case Value::value_t::object:
      return !value.empty();
    case Value::value_t::binary:
      return true;
  }
  return false;
}

namespace {

// Python's repr(float): the shortest digits that read back, in fixed
// notation for exponents -4..15 and scientific ("1e+16") outside.
std::string python_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::scientific);
  std::string sci(buffer, end);  // "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    out += exp_text;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t point = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= point) {
      out = digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return negative ? "-" + out : out;
}

// Python's repr(str): single quotes unless the text has a single quote and
// no double quote; printable characters (all of non-ASCII here) kept.
std::string python_string_repr(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

void append_json_escape(std::string& out, unsigned code_unit) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "\\u%04x", code_unit);
  out += hex;
}

// json.dumps's string escaping; with ensure_ascii every code point past
// ASCII as \uXXXX, those past U+FFFF as a UTF-16 surrogate pair.
void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  for (size_t at = 0; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (ensure_ascii && c == 0x7f) {  // json.dumps escapes all but ' ' to '~'
      append_json_escape(out, c);
      ++at;
      continue;
    }
    if (ensure_ascii && c >= 0x80) {
      const DecodedChar d = decode_utf8(text, at);
      at += d.length;
      const char32_t cp = d.code_point == kInvalidCodePoint ? 0xfffd : d.code_point;
      if (cp > 0xffff) {
        append_json_escape(out, 0xd800 + ((cp - 0x10000) >> 10));
        append_json_escape(out, 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        append_json_escape(out, cp);
      }
      continue;
    }
    ++at;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          append_json_escape(out, c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const Value& value, const JsonStyle& style, int depth) {
  const auto& [item_separator, key_separator] =
      style.separators ? *style.separators
                       : std::pair<std::string, std::string>(style.indent ? "," : ", ", ": ");
  auto newline = [&](int level) {
    if (!style.indent) return;
    out += '\n';
    for (int k = 0; k < level; ++k) out += *style.indent;
  };
  switch (value.type()) {
    case Value::value_t::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        append_json(out, value[i], style, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::value_t::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::string> keys;
      for (auto it = value.begin(); it != value.end(); ++it) keys.push_back(it.key());
      if (style.sort_keys) std::sort(keys.begin(), keys.end());
      out += '{';
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        append_json_string(out, keys[i], style.ensure_ascii);
        out += key_separator;
        append_json(out, value.at(keys[i]), style, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::value_t::string:
      append_json_string(out, value.get_ref<const std::string&>(), style.ensure_ascii);
      return;
    case Value::value_t::number_float: {
      const double x = value.get<double>();  // json.dumps writes JavaScript's names
      out += std::isnan(x)   ? "NaN"
             : std::isinf(x) ? (x < 0 ? "-Infinity" : "Infinity")
                             : python_float(x);
      return;
    }
    case Value::value_t::discarded:
      fail("tojson: cannot write an undefined value as JSON");
    case Value::value_t::binary:
      fail("tojson: cannot write a ", type_name(value), " as JSON");
    default:
      out += value.dump();  // null, true, false, integers: as JSON writes them
  }
}

bool both_integers(const Value& a, const Value& b) {
  return a.is_number_integer() && b.is_number_integer();
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int number_order(double a, double b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

bool is_number_like(const Value& v) {
  return v.is_number() || v.is_boolean();
}

double as_double(const Value& v) {
  return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>();
}

}  // namespace

std::string to_text(const Value& value) {
  switch (value.type()) {
    case Value::value_t::discarded:
      return "";
    case Value::value_t::string:
      return value.get<std::string>();
    default:
      return python_repr(value);
  }
}

std::string python_repr(const Value& value) {
  switch (value.type()) {
    case Value::value_t::null:
      return "None";
    case Value::value_t::discarded:
      return "Undefined";
    case Value::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Value::value_t::number_float:
      return python_float(value.get<double>());
    case Value::value_t::string:
      return python_string_repr(value.get<std::string>());
    case Value::value_t::array: {
      const bool tuple = is_tuple(value);
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ", ";
        out += python_repr(value[i]);
      }
      if (tuple && value.size() == 1) out += ',';  // (1,): Python's one-item tuple
      return out + (tuple ? ")" : "]");
    }
    case Value::value_t::binary:
      return is_macro(value) ? "<Macro " + python_string_repr(macro_name(value)) + ">"
                             : "<LoopContext>";
    case Value::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += python_string_repr(it.key()) + ": " + python_repr(it.value());
      }
      return out + "}";
    }
    default:
      return value.dump();  // integers
  }
}

std::string to_json(const Value& value, const JsonStyle& style) {
  std::string out;
  append_json(out, value, style, 0);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (is_number_like(a) && is_number_like(b)) return as_double(a) == as_double(b);
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size() || is_tuple(a) != is_tuple(b)) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !equal(it.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

bool less(const Value& a, const Value& b) {
  if (is_number_like(a) && is_number_like(b)) return number_order(as_double(a), as_double(b)) < 0;
  if (a.is_string() && b.is_string())
    return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
  if (a.is_array() && b.is_array() && is_tuple(a) == is_tuple(b)) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (less(a[i], b[i])) return true;
      if (less(b[i], a[i])) return false;
    }
    return a.size() < b.size();
  }
  fail("cannot order ", type_name(a), " and ", type_name(b));
}

std::string type_name(const Value& value) {
  switch (value.type()) {
    case Value::value_t::null:
      return "none";
    case Value::value_t::discarded:
      return "undefined";
    case Value::value_t::boolean:
      return "boolean";
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned:
      return "integer";
    case Value::value_t::number_float:
      return "float";
    case Value::value_t::string:
      return "string";
    case Value::value_t::array:
      return is_tuple(value) ? "tuple" : "list";
    case Value::value_t::object:
      return "mapping";
    case Value::value_t::binary:
      return is_macro(value) ? "macro" : "loop";
  }
  return "?";
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (op == "+") {
    if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
    if (a.is_array() && b.is_array() && is_tuple(a) == is_tuple(b)) {
      Value out = a;
      for (const Value& item : b) out.push_back(item);
      return out;
    }
  }
  if (op == "*" && (a.is_string() || a.is_array()) && b.is_number_integer()) {
    Value out = a.is_string() ? Value("") : is_tuple(a) ? as_tuple(Value::array()) : Value::array();
    for (int64_t i = 0; i < b.get<int64_t>(); ++i) {
      if (a.is_string()) {
        out.get_ref<std::string&>() += a.get<std::string>();
      } else {
        for (const Value& item : a) out.push_back(item);
      }
    }
    return out;
  }
  if (!a.is_number() || !b.is_number()) {
    fail("cannot apply '", op, "' to ", type_name(a), " and ", type_name(b));
  }
  const bool ints = both_integers(a, b);
  const double x = a.get<double>(), y = b.get<double>();
  if ((op == "/" || op == "//" || op == "%") && y == 0) fail("division by zero");
  if (op == "+") return ints ? Value(a.get<int64_t>() + b.get<int64_t>()) : Value(x + y);
  if (op == "-") return ints ? Value(a.get<int64_t>() - b.get<int64_t>()) : Value(x - y);
  if (op == "*") return ints ? Value(a.get<int64_t>() * b.get<int64_t>()) : Value(x * y);
  if (op == "/") return x / y;
  if (op == "//")
    return ints ? Value(floor_div(a.get<int64_t>(), b.get<int64_t>())) : Value(std::floor(x / y));
  if (op == "%") {
    if (ints) {
      const int64_t i = a.get<int64_t>(), j = b.get<int64_t>();
      return i - floor_div(i, j) * j;
    }
    return x - std::floor(x / y) * y;
  }
  if (op == "**") {
    if (ints && b.get<int64_t>() >= 0) return static_cast<int64_t>(std::llround(std::pow(x, y)));
    return std::pow(x, y);
  }
  fail("unknown operator '", op, "'");
}

}  // namespace lt::data::jinja
