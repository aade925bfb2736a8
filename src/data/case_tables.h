#pragma once
// Python's Unicode case mapping (str.upper, str.lower, str.title), generated
// into case_tables.cpp by tools/gen_case_tables.py from the str methods
// themselves. Every table is sorted by code point so lookups can
// binary-search it.
#include <cstddef>
#include <cstdint>

namespace lt::data::case_tables {

// Code points first, first + stride, ..., last each map to code point + delta.
// No other mapped code point lies inside [first, last], so the run found by a
// binary search on `first` is the only one that can hold a code point.
struct CaseRun {
  char32_t first;
  char32_t last;
  int32_t delta;
  uint8_t stride;
};

// A code point that maps to several code points (SpecialCasing.txt:
// 'ß'.upper() == "SS"): `length` code points at kCaseExpansionData[offset].
struct CaseExpansion {
  char32_t code_point;
  uint16_t offset;
  uint8_t length;
};

// One direction of mapping. A code point in neither table maps to itself.
struct CaseMapping {
  const CaseRun* runs;
  size_t run_count;
  const CaseExpansion* expansions;
  size_t expansion_count;
};

// A run of code points [first, last] that have a property.
struct CodePointSpan {
  char32_t first;
  char32_t last;
};

extern const CaseMapping kUpper;
// U+03A3 maps to U+03C3 here; the final form U+03C2 depends on the context
// (Final_Sigma), which the caller applies.
extern const CaseMapping kLower;
extern const CaseMapping kTitle;
extern const char32_t kCaseExpansionData[];

// Unicode's Cased and Case_Ignorable properties, which decide str.title()'s
// word starts and Final_Sigma.
extern const CodePointSpan kCasedSpans[];
extern const size_t kCasedSpanCount;
extern const CodePointSpan kCaseIgnorableSpans[];
extern const size_t kCaseIgnorableSpanCount;

}  // namespace lt::data::case_tables
