#include "data/pre_tokenizer_split.h"

#include <algorithm>
#include <utility>

namespace lt::data {

LiteralSplit LiteralSplit::from_json(const nlohmann::json& value, const JsonField& field,
                                     const std::string& literal) {
  if (literal.empty()) field.member("pattern").member("String").fail("expected a non-empty string");
  const std::string name =
      require_string(require_member(value, field, "behavior"), field.member("behavior"));
  static constexpr std::pair<const char*, Behavior> kNames[] = {
      {"Removed", Behavior::kRemoved},
      {"Isolated", Behavior::kIsolated},
      {"MergedWithPrevious", Behavior::kMergedWithPrevious},
      {"MergedWithNext", Behavior::kMergedWithNext},
      {"Contiguous", Behavior::kContiguous}};
  for (const auto& [known, behavior] : kNames) {
    if (name == known) return LiteralSplit{literal, behavior};
  }
  field.member("behavior")
      .fail(
          "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous, found \"" +
          name + "\"");
}

void LiteralSplit::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  // The text as alternating stretches: (begin, end, is a delimiter), every
  // occurrence of the delimiter a stretch of its own, as HF finds them.
  struct Stretch {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Stretch> stretches;
  size_t pos = 0;
  for (size_t at; (at = text.find(delimiter, pos)) != std::string_view::npos;
       pos = at + delimiter.size()) {
    if (at > pos) stretches.push_back({pos, at, false});
    stretches.push_back({at, at + delimiter.size(), true});
  }
  if (pos < text.size()) stretches.push_back({pos, text.size(), false});

  std::vector<std::pair<size_t, size_t>> out;
  bool previous_delimiter = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Stretch& s : stretches)
        if (!s.delimiter) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::kIsolated:
      for (const Stretch& s : stretches) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::kContiguous:
      for (const Stretch& s : stretches) {
        if (s.delimiter && previous_delimiter) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.delimiter;
      }
      break;
    case Behavior::kMergedWithPrevious:
    case Behavior::kMergedWithNext: {
      // A delimiter after a non-delimiter joins that piece; one after
      // another delimiter (or first) stands alone. MergedWithNext is the
      // mirror image: HF folds it from the end.
      const bool next = behavior == Behavior::kMergedWithNext;
      if (next) std::reverse(stretches.begin(), stretches.end());
      for (const Stretch& s : stretches) {
        if (s.delimiter && !previous_delimiter && !out.empty()) {
          if (next) {
            out.back().first = s.begin;
          } else {
            out.back().second = s.end;
          }
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.delimiter;
      }
      if (next) std::reverse(out.begin(), out.end());
      break;
    }
  }
  for (const auto& [begin, end] : out) pieces.push_back(text.substr(begin, end - begin));
}

}  // namespace lt::data
