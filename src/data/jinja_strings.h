#pragma once
// Python's str methods as chat templates call them (strip, split, ...),
// on UTF-8 text, counting and indexing by code point as Python does.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data::jinja {

// The code points of `text`, each as its UTF-8 bytes (an invalid byte is one
// item of its own).
std::vector<std::string> code_points(std::string_view text);
size_t code_point_count(std::string_view text);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip([chars]): without `chars`, Python's whitespace (str.isspace:
// ASCII \t\n\v\f\r, U+001C-001F, space, U+0085, U+00A0, U+1680,
// U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000).
std::string strip(std::string_view text, const std::optional<std::string>& chars, StripSide side);

// str.split([sep[, maxsplit]]): without `sep`, runs of whitespace split and
// empty parts are dropped. An empty `sep` is an lt::Error, as in Python.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep,
                               int64_t max_split);

// Case mapping of ASCII letters (other letters are kept as they are).
std::string ascii_upper(std::string_view text);
std::string ascii_lower(std::string_view text);
// str.title() and str.capitalize() over ASCII letters.
std::string title_case(std::string_view text);
std::string capitalize(std::string_view text);
// jinja2's title filter, which differs from str.title(): words start only
// after whitespace, '-', '(', '{', '[' or '<' ("<|im_end|>" is unchanged,
// "o'neil" is "O'neil"); a word's first letter is upper-cased and the rest
// lower-cased (ASCII letters).
std::string jinja_title(std::string_view text);

// str.replace(old, new[, count]); count < 0 replaces all.
std::string replace(std::string_view text, std::string_view old, std::string_view with,
                    int64_t count);

}  // namespace lt::data::jinja
