#include "data/unicode.h"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/unicode_tables.h"

namespace lt::data {

namespace {

namespace tables = unicode_tables;

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kReplacementChar = 0xFFFD;

// The generated tables are ranges (compact, reviewable); the hot path wants
// one load per code point, so the first lookup expands them into a
// two-level table: 256-code-point blocks, identical blocks shared. About
// 4352 block indices plus a few hundred distinct blocks, ~100 KB.
class PropertyTable {
 public:
  PropertyTable() {
    std::vector<uint8_t> flat(kMaxCodePoint + 1, 0);
    for (size_t i = 0; i < tables::kCharClassRangeCount; ++i) {
      const auto& r = tables::kCharClassRanges[i];
      for (char32_t cp = r.first; cp <= r.last; ++cp) flat[cp] |= r.value;
    }
    for (size_t i = 0; i < tables::kNfcSensitiveRangeCount; ++i) {
      const auto& r = tables::kNfcSensitiveRanges[i];
      for (char32_t cp = r.first; cp <= r.last; ++cp) flat[cp] |= detail::kNfcSensitiveBit;
    }
    block_index_.resize((kMaxCodePoint + 1) / kBlockSize);
    std::unordered_map<std::string, uint16_t> index_of_block;
    for (size_t block = 0; block < block_index_.size(); ++block) {
      std::string content(reinterpret_cast<const char*>(flat.data()) + block * kBlockSize,
                          kBlockSize);
      auto [it, inserted] =
          index_of_block.emplace(content, static_cast<uint16_t>(blocks_.size() / kBlockSize));
      if (inserted) blocks_.insert(blocks_.end(), content.begin(), content.end());
      block_index_[block] = it->second;
    }
  }

  uint8_t get(char32_t cp) const {
    if (cp > kMaxCodePoint) return 0;
    return blocks_[block_index_[cp / kBlockSize] * kBlockSize + cp % kBlockSize];
  }

 private:
  static constexpr size_t kBlockSize = 256;
  std::vector<uint16_t> block_index_;
  std::vector<uint8_t> blocks_;
};

const PropertyTable& property_table() {
  static const PropertyTable table;
  return table;
}

bool is_continuation(unsigned char byte) {
  return (byte & 0xC0) == 0x80;
}

// Length of the longest prefix of text[pos..] that is a valid UTF-8 sequence
// or the start of one (the "maximal subpart" of Unicode 3.9), with the
// decoded code point when the sequence is complete.
struct Utf8Prefix {
  uint32_t length;
  bool complete;
  char32_t code_point;
};

Utf8Prefix scan_utf8(std::string_view text, size_t pos) {
  auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, true, lead};
  uint32_t needed;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 1;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 2;
    cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;  // no overlongs
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 3;
    cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;  // no overlongs
    if (lead == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {1, false, kInvalidCodePoint};
  }
  uint32_t length = 1;
  for (uint32_t i = 0; i < needed; ++i) {
    if (pos + length >= text.size()) return {length, false, kInvalidCodePoint};
    auto byte = static_cast<unsigned char>(text[pos + length]);
    bool ok = i == 0 ? (byte >= lo && byte <= hi) : is_continuation(byte);
    if (!ok) return {length, false, kInvalidCodePoint};
    cp = (cp << 6) | (byte & 0x3F);
    ++length;
  }
  return {length, true, cp};
}

// The value of the range holding `cp` in a sorted table; 0 outside them.
uint8_t range_value(const tables::CodePointRange* begin, size_t count, char32_t cp) {
  const auto* end = begin + count;
  const auto* it = std::upper_bound(
      begin, end, cp,
      [](char32_t value, const tables::CodePointRange& r) { return value < r.first; });
  if (it == begin) return 0;
  --it;
  return cp <= it->last ? it->value : 0;
}

uint8_t ccc_of(char32_t cp) {
  if (cp < 0x300 || cp > kMaxCodePoint) return 0;
  return range_value(tables::kCombiningClassRanges, tables::kCombiningClassRangeCount, cp);
}

// Hangul syllables decompose and compose by arithmetic (Unicode 3.12).
constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161,
                   kHangulTBase = 0x11A7;
constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount;
constexpr char32_t kHangulSCount = kHangulLCount * kHangulNCount;

void decompose_into(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    char32_t index = cp - kHangulSBase;
    out.push_back(kHangulLBase + index / kHangulNCount);
    out.push_back(kHangulVBase + (index % kHangulNCount) / kHangulTCount);
    if (index % kHangulTCount != 0) out.push_back(kHangulTBase + index % kHangulTCount);
    return;
  }
  const auto* begin = tables::kDecompositions;
  const auto* end = begin + tables::kDecompositionCount;
  const auto* it = std::lower_bound(
      begin, end, cp,
      [](const tables::Decomposition& d, char32_t value) { return d.code_point < value; });
  if (it != end && it->code_point == cp) {
    out.insert(out.end(), tables::kDecompositionData + it->offset,
               tables::kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (first, second), or 0 when they do not compose.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kHangulLBase && first < kHangulLBase + kHangulLCount && second >= kHangulVBase &&
      second < kHangulVBase + kHangulVCount) {
    return kHangulSBase +
           ((first - kHangulLBase) * kHangulVCount + (second - kHangulVBase)) * kHangulTCount;
  }
  if (first >= kHangulSBase && first < kHangulSBase + kHangulSCount &&
      (first - kHangulSBase) % kHangulTCount == 0 && second > kHangulTBase &&
      second < kHangulTBase + kHangulTCount) {
    return first + (second - kHangulTBase);
  }
  const auto* begin = tables::kCompositions;
  const auto* end = begin + tables::kCompositionCount;
  const auto* it =
      std::lower_bound(begin, end, std::pair{first, second},
                       [](const tables::Composition& c, std::pair<char32_t, char32_t> key) {
                         return std::pair{c.first, c.second} < key;
                       });
  if (it != end && it->first == first && it->second == second) return it->composite;
  return 0;
}

}  // namespace

namespace detail {
uint8_t unicode_properties_slow(char32_t code_point) {
  return property_table().get(code_point);
}
}  // namespace detail

DecodedChar decode_utf8_multibyte(std::string_view text, size_t pos) {
  Utf8Prefix prefix = scan_utf8(text, pos);
  if (!prefix.complete) return {kInvalidCodePoint, 1};
  return {prefix.code_point, prefix.length};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_word_char(char32_t code_point) {
  return range_value(tables::kWordCharRanges, tables::kWordCharRangeCount, code_point) != 0;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    Utf8Prefix prefix = scan_utf8(text, pos);
    if (!prefix.complete) return false;
    pos += prefix.length;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    Utf8Prefix prefix = scan_utf8(bytes, pos);
    if (prefix.complete) {
      out.append(bytes.substr(pos, prefix.length));
    } else {
      append_utf8(out, kReplacementChar);
    }
    pos += prefix.length;
  }
  return out;
}

uint8_t combining_class(char32_t code_point) {
  return ccc_of(code_point);
}

bool nfc_if_changed(std::string_view text, std::string& out) {
  // Quick check: a string without a sensitive code point is already NFC.
  // U+0300 is the first sensitive code point, so ASCII and Latin-1 skip the
  // table entirely.
  bool sensitive = false;
  for (size_t pos = 0; pos < text.size() && !sensitive;) {
    DecodedChar ch = decode_utf8(text, pos);
    pos += ch.length;
    if (ch.code_point >= 0x300 && ch.code_point <= kMaxCodePoint) {
      sensitive = (detail::unicode_properties_slow(ch.code_point) & detail::kNfcSensitiveBit) != 0;
    }
  }
  if (!sensitive) return false;

  // Canonical decomposition. Invalid bytes travel as kInvalidCodePoint + the
  // byte: starters that compose with nothing.
  std::vector<char32_t> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    DecodedChar ch = decode_utf8(text, pos);
    if (ch.code_point == kInvalidCodePoint) {
      chars.push_back(kInvalidCodePoint + static_cast<unsigned char>(text[pos]));
    } else {
      decompose_into(ch.code_point, chars);
    }
    pos += ch.length;
  }

  // Canonical ordering: a stable sort of each run of non-starters by class.
  std::vector<uint8_t> classes(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) classes[i] = ccc_of(chars[i]);
  for (size_t i = 1; i < chars.size(); ++i) {
    for (size_t j = i; j > 0 && classes[j] != 0 && classes[j - 1] > classes[j]; --j) {
      std::swap(chars[j], chars[j - 1]);
      std::swap(classes[j], classes[j - 1]);
    }
  }

  // Canonical composition (Unicode 3.11): a character composes with the last
  // starter unless a character between them blocks it (class 0, or a class
  // not below its own).
  size_t write = 0;
  size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;  // class of the last character kept after the starter; -1: none
  for (size_t read = 0; read < chars.size(); ++read) {
    char32_t ch = chars[read];
    int ch_class = classes[read];
    if (have_starter && (last_class == -1 || (last_class != 0 && last_class < ch_class))) {
      char32_t composite = compose_pair(chars[starter], ch);
      if (composite != 0) {
        chars[starter] = composite;
        continue;
      }
    }
    if (ch_class == 0) {
      starter = write;
      have_starter = true;
      last_class = -1;
    } else {
      last_class = ch_class;
    }
    chars[write] = ch;
    classes[write] = static_cast<uint8_t>(ch_class);
    ++write;
  }

  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < write; ++i) {
    if (chars[i] >= kInvalidCodePoint) {
      result.push_back(static_cast<char>(chars[i] - kInvalidCodePoint));
    } else {
      append_utf8(result, chars[i]);
    }
  }
  if (result == text) return false;
  out = std::move(result);
  return true;
}

std::string nfc(std::string_view text) {
  std::string out;
  if (nfc_if_changed(text, out)) return out;
  return std::string(text);
}

}  // namespace lt::data
