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

// Case mapping over all of Unicode, exactly as Python's str methods do it
// (the Unicode version of tools/gen_case_tables.py's Python): a code point
// may map to several ('ß'.upper() is "SS", 'İ'.lower() is "i\u0307"), and
// lower() turns U+03A3 into final sigma at the end of a word. Invalid UTF-8
// bytes are copied unchanged. jinja2's upper, lower and capitalize filters
// are these methods.
std::string upper(std::string_view text);
std::string lower(std::string_view text);
// str.title(): a character after a cased one is lowered, any other is
// title-cased ('ǆ' becomes 'ǅ').
std::string title(std::string_view text);
// str.capitalize() (Python 3.8+): the first character title-cased, the rest
// lowered.
std::string capitalize(std::string_view text);
// jinja2's title filter, which differs from str.title(): words start only
// after whitespace, '-', '(', '{', '[' or '<' ("<|im_end|>" is unchanged,
// "o'neil" is "O'neil"); a word's first character is upper()ed (not
// title-cased) and the rest lower()ed as a string of its own.
std::string jinja_title(std::string_view text);

// str.replace(old, new[, count]); count < 0 replaces all.
std::string replace(std::string_view text, std::string_view old, std::string_view with,
                    int64_t count);

}  // namespace lt::data::jinja
