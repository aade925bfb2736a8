#include "data/math_answer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace lt::data {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view rest_of_line(std::string_view text, size_t from) {
  std::string_view rest = text.substr(from);
  return rest.substr(0, rest.find('\n'));
}

// The contents of the last `command`{...} in `text`, braces matched; none
// when there is no such command or its braces never close.
std::optional<std::string_view> last_braced(std::string_view text, std::string_view command) {
  const size_t at = text.rfind(command);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t open = at + command.size();
  int depth = 1;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open, i - open);
  }
  return std::nullopt;
}

// A number as the text writes it: [-]digits[,ddd...][.digits] or [-].digits,
// optionally "/digits" after an integer. Returns its length at `pos` (0: none).
size_t number_length(std::string_view s, size_t pos) {
  size_t i = pos;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const size_t digits_start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  bool integer = i > digits_start;
  // Thousands groups: a comma followed by exactly three digits.
  while (integer && i + 3 < s.size() && s[i] == ',' && is_digit(s[i + 1]) && is_digit(s[i + 2]) &&
         is_digit(s[i + 3]) && (i + 4 >= s.size() || !is_digit(s[i + 4]))) {
    i += 4;
  }
  if (i < s.size() && s[i] == '.' && i + 1 < s.size() && is_digit(s[i + 1])) {
    integer = false;
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i == digits_start) return 0;
  if (integer && i + 1 < s.size() && s[i] == '/' && is_digit(s[i + 1])) {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i - pos;
}

// `text` without GSM8K's calculator notes ("<<9*2=18>>"), which are not
// part of the prose: each becomes a space.
std::string without_calculator_notes(std::string_view text) {
  std::string prose;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "<<") == 0) {
      const size_t close = text.find(">>", i + 2);
      if (close != std::string_view::npos) {
        i = close + 1;
        prose += ' ';
        continue;
      }
    }
    prose += text[i];
  }
  return prose;
}

// The last number of `text`, as written, calculator notes skipped.
std::string last_number(std::string_view text) {
  const std::string prose = without_calculator_notes(text);
  std::string_view s = prose;
  std::string last;
  size_t i = 0;
  while (i < s.size()) {
    // A '-' is a sign only where no word or number runs into it ("2023-24"
    // is a range, "-7" a number).
    const bool sign_here =
        (s[i] == '-' && (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]))));
    const bool starts =
        is_digit(s[i]) || sign_here ||
        (s[i] == '.' && i + 1 < s.size() && is_digit(s[i + 1]) && (i == 0 || !is_digit(s[i - 1])));
    const size_t n = starts ? number_length(s, i) : 0;
    if (n == 0) {
      ++i;
      continue;
    }
    last = std::string(s.substr(i, n));
    i += n;
  }
  return last;
}

// ---- numbers in canonical form ----

struct Decimal {
  bool negative = false;
  std::string integer, fraction;  // digits only, no separators
};

// `s` entirely a decimal number (thousands commas allowed)? Parsed.
std::optional<Decimal> parse_decimal(std::string_view s) {
  if (s.empty() || number_length(s, 0) != s.size() || s.find('/') != std::string_view::npos)
    return std::nullopt;
  Decimal d;
  size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    d.negative = s[0] == '-';
    i = 1;
  }
  for (; i < s.size() && s[i] != '.'; ++i) {
    if (s[i] != ',') d.integer += s[i];
  }
  if (i < s.size()) d.fraction = std::string(s.substr(i + 1));
  return d;
}

std::string canonical_decimal(Decimal d) {
  d.integer.erase(0, std::min(d.integer.find_first_not_of('0'), d.integer.size()));
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.integer.empty()) d.integer = "0";
  if (d.integer == "0" && d.fraction.empty()) return "0";  // "-0" too
  return (d.negative ? "-" : "") + d.integer + (d.fraction.empty() ? "" : "." + d.fraction);
}

// Digits as an integer, when they fit in 18 digits (so products of two stay
// below 2^127 and sums of them below 2^64 in the reductions here).
std::optional<uint64_t> small_integer(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// p/q (q > 0) reduced, written as a decimal when it is one exactly.
std::string canonical_fraction(bool negative, uint64_t p, uint64_t q) {
  const uint64_t g = std::gcd(p, q);
  p /= g;
  q /= g;
  if (p == 0) return "0";
  const std::string sign = negative ? "-" : "";
  uint64_t rest = q;
  while (rest % 2 == 0) rest /= 2;
  while (rest % 5 == 0) rest /= 5;
  if (rest != 1) return sign + std::to_string(p) + "/" + std::to_string(q);
  // Long division ends: q has only the factors 2 and 5 (at most 60 digits).
  std::string out = sign + std::to_string(p / q);
  uint64_t r = p % q;
  if (r != 0) out += '.';
  while (r != 0) {
    const unsigned __int128 wide = static_cast<unsigned __int128>(r) * 10;
    out += static_cast<char>('0' + static_cast<int>(wide / q));
    r = static_cast<uint64_t>(wide % q);
  }
  return out;
}

// "a/b" or "w a/b" (a mixed number), integers only, optional sign.
std::optional<std::string> canonical_simple_fraction(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  s = trim(s);
  uint64_t whole = 0;
  const size_t space = s.find(' ');
  if (space != std::string_view::npos) {
    auto w = small_integer(s.substr(0, space));
    if (!w) return std::nullopt;
    whole = *w;
    s = trim(s.substr(space + 1));
  }
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto p = small_integer(s.substr(0, slash));
  auto q = small_integer(s.substr(slash + 1));
  if (!p || !q || *q == 0) return std::nullopt;
  const unsigned __int128 num = static_cast<unsigned __int128>(whole) * *q + *p;
  if (num > UINT64_MAX) return std::nullopt;
  return canonical_fraction(negative, static_cast<uint64_t>(num), *q);
}

std::optional<std::string> canonical_number(std::string_view s) {
  if (auto d = parse_decimal(s)) return canonical_decimal(*d);
  return canonical_simple_fraction(s);
}

// ---- text clean-up ----

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// \command{X} -> X, for every occurrence (innermost braces matched).
void unwrap_command(std::string& s, std::string_view command) {
  for (size_t at = s.find(command); at != std::string::npos; at = s.find(command, at)) {
    const size_t open = at + command.size();
    int depth = 1;
    size_t close = open;
    for (; close < s.size(); ++close) {
      if (s[close] == '{') ++depth;
      if (s[close] == '}' && --depth == 0) break;
    }
    if (close >= s.size()) return;
    s.erase(close, 1);
    s.erase(at, command.size());
  }
}

// "\frac{a}{b}" (whole string, a and b integers) -> "a/b"; "\frac12" -> "1/2".
std::string frac_to_slash(std::string s) {
  replace_all(s, "\\dfrac", "\\frac");
  replace_all(s, "\\tfrac", "\\frac");
  std::string sign;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    sign = s.substr(0, 1);
    s.erase(0, 1);
  }
  if (s.rfind("\\frac", 0) != 0) return sign + s;
  std::string_view rest = std::string_view(s).substr(5);
  auto argument = [&](std::string& out) {
    if (rest.empty()) return false;
    if (rest[0] != '{') {  // \frac12: single-character arguments
      out = std::string(1, rest[0]);
      rest.remove_prefix(1);
      return true;
    }
    const size_t close = rest.find('}');
    if (close == std::string_view::npos) return false;
    out = std::string(trim(rest.substr(1, close - 1)));
    rest.remove_prefix(close + 1);
    return true;
  };
  std::string a, b;
  if (!argument(a) || !argument(b) || !rest.empty() || !small_integer(a) || !small_integer(b))
    return sign + s;
  return sign + a + "/" + b;
}

}  // namespace

std::string extract_answer(std::string_view text, AnswerFallback fallback) {
  // The later of the two markers: a GSM8K solution may say "the answer is"
  // in its prose and still end on "#### 8". Each reads to the end of its
  // line, calculator notes dropped ("The answer is <<8=8>>8.").
  const std::string_view answer_is = "the answer is";
  const size_t prose_at = lower(text).rfind(answer_is);
  const size_t hashes_at = text.rfind("####");
  std::vector<std::pair<size_t, size_t>> markers;  // where each marker's answer starts
  if (prose_at != std::string::npos) markers.emplace_back(prose_at, prose_at + answer_is.size());
  if (hashes_at != std::string_view::npos) markers.emplace_back(hashes_at, hashes_at + 4);
  std::sort(markers.rbegin(), markers.rend());
  for (const auto& [at, from] : markers) {
    const std::string rest = without_calculator_notes(rest_of_line(text, from));
    std::string_view answer = trim(rest);
    if (at == prose_at && !answer.empty() && answer[0] == ':') answer = trim(answer.substr(1));
    // A "####" line without a digit is a Markdown heading ("#### Verification"),
    // not GSM8K's answer line.
    if (at == hashes_at && std::none_of(answer.begin(), answer.end(), is_digit)) continue;
    if (!answer.empty()) return std::string(answer);
  }
  if (auto boxed = last_braced(text, "\\boxed{")) return std::string(trim(*boxed));
  if (fallback == AnswerFallback::kWholeText) return std::string(trim(text));
  return last_number(text);
}

std::string normalize_answer(std::string_view answer) {
  std::string s(answer);
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 MINUS SIGN
  for (std::string_view command : {"\\boxed{", "\\text{", "\\textbf{", "\\mathrm{", "\\mbox{"})
    unwrap_command(s, command);
  for (std::string_view drop : {"\\$", "$", "\\(", "\\)", "\\!", "\\,", "\\;", "\\left", "\\right",
                                "^\\circ", "^{\\circ}", "\\%", "%", "\\displaystyle"}) {
    replace_all(s, drop, "");
  }
  std::string_view view = trim(s);
  // A sentence's end: "#### 5." or a list's "#### 5,".
  while (!view.empty() && (view.back() == '.' || view.back() == ','))
    view = trim(view.substr(0, view.size() - 1));
  if (size_t eq = view.rfind('='); eq != std::string_view::npos) view = trim(view.substr(eq + 1));
  std::string text = frac_to_slash(std::string(view));

  if (auto number = canonical_number(text)) return *number;
  // A number followed by words: "18 dollars", "3 1/2 cups", "5 cm".
  for (size_t cut = text.find(' '); cut != std::string::npos; cut = text.find(' ', cut + 1)) {
    std::string_view head = trim(std::string_view(text).substr(0, cut));
    std::string_view tail = std::string_view(text).substr(cut);
    const bool words_only = std::none_of(tail.begin(), tail.end(), [](char c) {
      return is_digit(c) || c == '^' || c == '\\' || c == '{' || c == '/';
    });
    if (!words_only) continue;
    if (auto number = canonical_number(head)) return *number;
    break;
  }
  std::string compact;
  for (char c : text) {
    if (!is_space(c)) compact += c;
  }
  return compact;
}

}  // namespace lt::data
