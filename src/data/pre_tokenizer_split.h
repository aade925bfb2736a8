#pragma once
// HF's Split pre-tokenizer on a literal {"String": ...} pattern, with its
// delimiter behaviours. Gemma's conversion has Split(" ", MergedWithPrevious)
// after a normalizer that has already turned every space into "▁".
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "data/json_fields.h"

namespace lt::data {

struct LiteralSplit {
  enum class Behavior {
    kRemoved,             // the delimiters go
    kIsolated,            // each delimiter is a piece of its own
    kMergedWithPrevious,  // a delimiter joins the piece before it
    kMergedWithNext,      // a delimiter joins the piece after it
    kContiguous,          // a run of delimiters is one piece
  };
  std::string delimiter;  // not empty
  Behavior behavior = Behavior::kRemoved;

  // A "Split" object whose pattern is {"String": `literal`}.
  static LiteralSplit from_json(const nlohmann::json& value, const JsonField& field,
                                const std::string& literal);

  // Appends the pieces of `text` (never empty ones), pointing into it.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;
};

}  // namespace lt::data
