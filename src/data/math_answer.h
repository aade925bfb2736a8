#pragma once
// The final answer of a math word problem's solution, and the normal form
// in which two answers are compared for exact match (`eval --task math`).
//
// Where the answer is (extract_answer), first match wins:
//   1. what follows the later of the last "The answer is" (MetaMathQA; any
//      case, an optional ':') and the last "####" (GSM8K), up to the end of
//      that line, GSM8K's calculator notes "<<2*3=6>>" removed; the other
//      marker when that is empty, or is a "####" line with no digit (a
//      Markdown heading);
//   2. MATH: the contents of the last \boxed{...} (braces matched);
//   3. otherwise (Fallback::kLastNumber) the last number of the text, after
//      GSM8K's calculator notes "<<2*3=6>>" are removed; or
//      (Fallback::kWholeText) the whole text, for a reference field that
//      holds the answer alone ("72", "\frac{1}{2}").
//
// The normal form (normalize_answer):
//   - spaces at both ends, a final '.' or ',', and '$' / "\$" / "\(" "\)"
//     are dropped; "\%" and '%' too; U+2212 (minus sign) reads as '-';
//   - LaTeX spacing and sizing (\! \, \; \left \right) and ^\circ go;
//   - "x = 5": what follows the last '=' (an answer written as an equation);
//   - a number followed by words or units with no digit ("18 dollars",
//     "5 cm", "3.5 hours.") is that number;
//   - a number is written canonically: thousands separators dropped ("1,000"
//     when every group after the first has three digits), a leading '+' and
//     leading zeros dropped, trailing zeros of a decimal dropped ("18.00" ->
//     "18", ".50" -> "0.5"), "-0" -> "0";
//   - a simple fraction a/b, \frac{a}{b} (\dfrac, \tfrac, \frac12) or a mixed
//     number "3 1/2" is reduced; written as a decimal when it is one exactly
//     (1/4 -> "0.25"), else "p/q" (2/6 -> "1/3"); so "1/2" matches "0.5";
//   - anything else (an interval, \sqrt{2}, a word) keeps its text with
//     every space removed, and must match that way.
// An empty result means there is no answer: it matches nothing.
#include <string>
#include <string_view>

namespace lt::data {

enum class AnswerFallback { kLastNumber, kWholeText };

// The answer's text as written (not normalized); empty when there is none.
std::string extract_answer(std::string_view text, AnswerFallback fallback);

std::string normalize_answer(std::string_view answer);

// Exact match of two normalized answers; an empty one (no answer) never
// matches.
inline bool answers_match(std::string_view predicted, std::string_view reference) {
  return !predicted.empty() && predicted == reference;
}

// The normalized answer of a model's output: markers, else the last number.
inline std::string predicted_answer(std::string_view output) {
  return normalize_answer(extract_answer(output, AnswerFallback::kLastNumber));
}
// The normalized answer of a reference field: markers, else the whole text.
inline std::string reference_answer(std::string_view field) {
  return normalize_answer(extract_answer(field, AnswerFallback::kWholeText));
}

}  // namespace lt::data
