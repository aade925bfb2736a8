#pragma once
// The Unicode data behind src/data/unicode.h, generated into
// unicode_tables.cpp by tools/gen_unicode_tables.py. Every table is sorted
// by code point so lookups can binary-search it.
#include <cstddef>
#include <cstdint>

namespace lt::data::unicode_tables {

// A run of code points [first, last] that share one value.
struct CodePointRange {
  char32_t first;
  char32_t last;
  uint8_t value;
};

// A code point's full canonical decomposition: `length` code points at
// kDecompositionData[offset].
struct Decomposition {
  char32_t code_point;
  uint16_t offset;
  uint8_t length;
};

// A primary composite: `first` + `second` compose to `composite` under NFC.
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

// Value: lt::data::CharClass; code points not listed are CharClass::kOther.
extern const CodePointRange kCharClassRanges[];
extern const size_t kCharClassRangeCount;
// Value: the canonical combining class; code points not listed have 0.
extern const CodePointRange kCombiningClassRanges[];
extern const size_t kCombiningClassRangeCount;
// Code points that can make NFC change a string (quick check No or Maybe, or
// a nonzero combining class); value is always 1.
extern const CodePointRange kNfcSensitiveRanges[];
extern const size_t kNfcSensitiveRangeCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const char32_t kDecompositionData[];
// Word characters of Hugging Face tokenizers' single_word added tokens (its
// Rust regex \w); value always 1. Generated into word_char_ranges.cpp by
// tools/reference/make_word_char_ranges.py, which probes the library.
extern const CodePointRange kWordCharRanges[];
extern const size_t kWordCharRangeCount;
// Sorted by (first, second).
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

}  // namespace lt::data::unicode_tables
