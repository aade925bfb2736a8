// UTF-8, character classes and NFC, against hand-checked expectations
// (Python's unicodedata / bytes.decode(errors="replace") for the values).
#include <gtest/gtest.h>

#include "data/unicode.h"

namespace lt::data {
namespace {

TEST(Utf8, DecodesValidSequencesOfEveryLength) {
  std::string text = "a\u00e9\u4e2d\U0001F600";
  std::vector<std::pair<char32_t, uint32_t>> decoded;
  for (size_t pos = 0; pos < text.size();) {
    DecodedChar ch = decode_utf8(text, pos);
    decoded.emplace_back(ch.code_point, ch.length);
    pos += ch.length;
  }
  std::vector<std::pair<char32_t, uint32_t>> expected = {
      {'a', 1}, {0xE9, 2}, {0x4E2D, 3}, {0x1F600, 4}};
  EXPECT_EQ(decoded, expected);
}

TEST(Utf8, RejectsOverlongsSurrogatesAndTruncation) {
  for (std::string bad :
       {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF0\x9F\x98", "\xFF"}) {
    EXPECT_FALSE(is_valid_utf8(bad));
    DecodedChar ch = decode_utf8(bad, 0);
    EXPECT_EQ(ch.code_point, kInvalidCodePoint);
    EXPECT_EQ(ch.length, 1u);
  }
  EXPECT_TRUE(is_valid_utf8("plain \u00e9 \U0001F600"));
}

TEST(Utf8, LossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(utf8_lossy("a\xFF"
                       "b"),
            "a\uFFFDb");
  EXPECT_EQ(utf8_lossy("\xE2\x82x"), "\uFFFDx");
  EXPECT_EQ(utf8_lossy("\xC0\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98\x80\x80"), "\U0001F600\uFFFD");
}

TEST(CharClass, MatchesOnigurumaClasses) {
  EXPECT_EQ(char_class('a'), CharClass::kLetter);
  EXPECT_EQ(char_class('5'), CharClass::kNumber);
  EXPECT_EQ(char_class(' '), CharClass::kSpace);
  EXPECT_EQ(char_class('\t'), CharClass::kSpace);
  EXPECT_EQ(char_class('_'), CharClass::kOther);
  EXPECT_EQ(char_class(0x00A0), CharClass::kSpace);  // no-break space (Zs)
  EXPECT_EQ(char_class(0x0085), CharClass::kSpace);  // next line
  EXPECT_EQ(char_class(0x3000), CharClass::kSpace);  // ideographic space
  EXPECT_EQ(char_class(0x2028), CharClass::kSpace);  // line separator (Zl)
  EXPECT_EQ(char_class(0x001C), CharClass::kOther);  // Python's isspace() says yes; \s says no
  EXPECT_EQ(char_class(0x180E), CharClass::kOther);  // Cf since Unicode 6.3
  EXPECT_EQ(char_class(0x200B), CharClass::kOther);  // zero-width space is Cf
  EXPECT_EQ(char_class(0x4E2D), CharClass::kLetter);
  EXPECT_EQ(char_class(0x0663), CharClass::kNumber);   // Arabic-Indic three
  EXPECT_EQ(char_class(0x00BD), CharClass::kNumber);   // ½ (No)
  EXPECT_EQ(char_class(0x2162), CharClass::kNumber);   // Ⅲ (Nl)
  EXPECT_EQ(char_class(0x0301), CharClass::kOther);    // combining acute (Mn)
  EXPECT_EQ(char_class(0x11F04), CharClass::kLetter);  // Kawi, Unicode 15
  EXPECT_EQ(char_class(0x105C0), CharClass::kLetter);  // Todhri, Unicode 16
  EXPECT_EQ(char_class(kInvalidCodePoint), CharClass::kOther);
}

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");    // Hangul L V T
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");          // Hangul LV + T
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");          // composition exclusion
  EXPECT_EQ(nfc("\u2126"), "\u03a9");                // singleton
  EXPECT_EQ(nfc("\u0344"), "\u0308\u0301");          // non-starter decomposition
  EXPECT_EQ(nfc("a\u0323\u0302"), "\u1ead");         // ậ
  EXPECT_EQ(nfc("a\u0302\u0323"), "\u1ead");         // reordered, then composed
  EXPECT_EQ(nfc("q\u0307\u0323"), "q\u0323\u0307");  // reordered, nothing composes
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                // Angstrom sign
  EXPECT_EQ(nfc("a\u0301\u0301"), "\u00e1\u0301");   // the second acute is blocked
  EXPECT_EQ(nfc("\u0b47\u0b3e"), "\u0b4b");          // two starters compose
  EXPECT_EQ(nfc("plain ASCII"), "plain ASCII");
}

TEST(Nfc, UsesUnicode9DataLikeHuggingFace) {
  // U+0898 got a nonzero combining class in Unicode 14; to Unicode 9 it is a
  // starter, so it is not reordered after U+0334.
  EXPECT_EQ(nfc("a\u0898\u0334"), "a\u0898\u0334");
  // U+11938 composes from these since Unicode 13, not in Unicode 9.
  EXPECT_EQ(nfc("\U00011935\U00011930"), "\U00011935\U00011930");
}

TEST(Nfc, PassesInvalidBytesThrough) {
  EXPECT_EQ(nfc("e\xFF\u0301"), "e\xFF\u0301");
  EXPECT_EQ(nfc("\xFF"
                "e\u0301"),
            "\xFF\u00e9");
}

TEST(Nfc, ReportsWhetherItChangedTheText) {
  std::string out = "untouched";
  EXPECT_FALSE(nfc_if_changed("\u00e9\u4e2d", out));
  EXPECT_EQ(out, "untouched");
  EXPECT_TRUE(nfc_if_changed("e\u0301", out));
  EXPECT_EQ(out, "\u00e9");
}

}  // namespace
}  // namespace lt::data
