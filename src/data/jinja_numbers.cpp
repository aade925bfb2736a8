#include "data/jinja_numbers.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"

namespace lt::data::jinja {

namespace {

// What int() and float() strip among ASCII: ' ' and \t..\r (not the
// separators \x1c-\x1f that str.strip() also takes).
std::string_view strip_space(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with_prefix(std::string_view s, char letter) {
  return s.size() >= 2 && s[0] == '0' && (s[1] == letter || s[1] == letter - 'a' + 'A');
}

// Digits of `base` with single '_' between them (and, after a prefix, one
// before the first); the digits alone into `out`. False if malformed.
bool take_digits(std::string_view s, int base, bool underscore_first, std::string& out) {
  bool previous_digit = underscore_first;
  for (char c : s) {
    if (c == '_') {
      if (!previous_digit) return false;
      previous_digit = false;
      continue;
    }
    if (digit_value(c) >= base) return false;
    out += c;
    previous_digit = true;
  }
  return !out.empty() && previous_digit;
}

}  // namespace

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

std::optional<int64_t> python_int(std::string_view text, int64_t base) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  std::string_view s = strip_space(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  bool prefixed = false;
  for (const auto& [letter, radix] : {std::pair{'x', 16}, std::pair{'o', 8}, std::pair{'b', 2}}) {
    if ((base == 0 || base == radix) && starts_with_prefix(s, letter)) {
      base = radix;
      prefixed = true;
      s.remove_prefix(2);
    }
  }
  const bool decimal_of_base_zero = base == 0;
  if (base == 0) base = 10;
  std::string digits;
  if (!take_digits(s, static_cast<int>(base), prefixed, digits)) return std::nullopt;
  // Base 0 refuses leading zeros on a nonzero decimal ("010"), as literals do.
  if (decimal_of_base_zero && digits.size() > 1 && digits[0] == '0' &&
      digits.find_first_not_of('0') != std::string::npos)
    return std::nullopt;
  uint64_t magnitude = 0;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : digits) {
    const auto d = static_cast<uint64_t>(digit_value(c));
    LT_CHECK(magnitude <= (limit - d) / static_cast<uint64_t>(base), "int: '", text,
             "' does not fit in 64 bits");
    magnitude = magnitude * static_cast<uint64_t>(base) + d;
  }
  return negative ? static_cast<int64_t>(-magnitude) : static_cast<int64_t>(magnitude);
}

std::optional<double> python_float(std::string_view text) {
  std::string_view s = strip_space(text);
  std::string clean;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    clean += s[0];
    s.remove_prefix(1);
  }
  std::string lower;
  for (char c : s) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "inf" || lower == "infinity" || lower == "nan") {
    const double v = lower == "nan" ? std::numeric_limits<double>::quiet_NaN()
                                    : std::numeric_limits<double>::infinity();
    return clean == "-" ? -v : v;
  }
  // digits [. digits] [e [sign] digits], a digit somewhere in the mantissa.
  const size_t e = s.find_first_of("eE");
  const std::string_view mantissa = s.substr(0, e);
  const size_t dot = mantissa.find('.');
  std::string whole, fraction;
  const std::string_view before = mantissa.substr(0, dot);
  const std::string_view after =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  if (!before.empty() && !take_digits(before, 10, false, whole)) return std::nullopt;
  if (!after.empty() && !take_digits(after, 10, false, fraction)) return std::nullopt;
  if (whole.empty() && fraction.empty()) return std::nullopt;
  clean += whole + "." + fraction;
  if (e != std::string_view::npos) {
    std::string_view exponent = s.substr(e + 1);
    clean += 'e';
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
      clean += exponent[0];
      exponent.remove_prefix(1);
    }
    std::string digits;
    if (!take_digits(exponent, 10, false, digits)) return std::nullopt;
    clean += digits;
  }
  return std::strtod(clean.c_str(), nullptr);
}

}  // namespace lt::data::jinja
