#pragma once
// The word characters of Hugging Face tokenizers' single_word added tokens
// (its Rust regex \w), generated into word_char_ranges.cpp by
// tools/reference/make_word_char_ranges.py, which probes the library.
#include <cstddef>
#include <iterator>

namespace lt::data::unicode_tables {

// Code points [first, last], sorted, disjoint.
struct WordCharRange {
  char32_t first;
  char32_t last;
};

extern const WordCharRange kWordCharRanges[];
extern const size_t kWordCharRangeCount;

}  // namespace lt::data::unicode_tables
