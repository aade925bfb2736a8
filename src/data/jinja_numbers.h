#pragma once
// Python's int(text, base) and float(text) on a template's strings, for
// jinja2's int and float filters: surrounding whitespace, a sign, '_'
// between digits, int's 0x/0o/0b prefixes (base 0 reads them), float's
// exponent, inf and nan. Only ASCII digits and ASCII whitespace (Python
// also takes other scripts' decimal digits and strips Unicode spaces such
// as U+00A0).
#include <cstdint>
#include <optional>
#include <string_view>

namespace lt::data::jinja {

// A digit's value in bases up to 36 (0-9, then a-z or A-Z); 99 for others.
int digit_value(char c);

// int(text, base): none where Python raises ValueError (a bad literal, or a
// base that is not 0 or 2..36). A value past 64 bits is an lt::Error.
std::optional<int64_t> python_int(std::string_view text, int64_t base);
// float(text): none where Python raises ValueError.
std::optional<double> python_float(std::string_view text);

}  // namespace lt::data::jinja
