// Case mapping as Python and jinja2 do it, over all of Unicode: the upper,
// lower, title and capitalize filters and str methods render each string of
// fixtures/jinja_case_goldens.json (made by
// tools/reference/make_jinja_case_goldens.py with jinja2 in transformers'
// environment) to jinja2's text. Then the str functions on single code
// points and invalid bytes, against what Python 3.11 gives (the literals
// were printed by Python; invalid bytes as Python maps them decoded with
// errors="surrogateescape").
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "data/jinja_strings.h"
#include "data/jinja_template.h"
#include "tokenizer_fixtures.h"

namespace lt::data::jinja {
namespace {

TEST(JinjaCase, RendersAsJinja2) {
  std::ifstream in(testing::fixtures_dir() / "jinja_case_goldens.json");
  const Value goldens = Value::parse(in);
  int checked = 0;
  for (const auto& c : goldens.at("cases")) {
    const std::string name = c.at("name");
    for (const auto& [source, text] : c.at("texts").items()) {
      std::string rendered;
      EXPECT_NO_THROW(rendered = Template(source, name).render({{"s", c.at("s")}}))
          << name << ": " << source;
      EXPECT_EQ(rendered, text.get<std::string>()) << name << ": " << source;
      ++checked;
    }
  }
  EXPECT_GE(checked, 8 * 20);
}

TEST(JinjaCase, UpperMapsAllOfUnicode) {
  EXPECT_EQ(upper("é"), "É");
  EXPECT_EQ(upper("µ"), "Μ");  // U+00B5 micro sign to Greek capital mu
  EXPECT_EQ(upper("ı"), "I");
  EXPECT_EQ(upper("ǆ"), "Ǆ");
  EXPECT_EQ(upper("ǅ"), "Ǆ");
  EXPECT_EQ(upper("ꭰ"), "Ꭰ");  // Cherokee small letter to capital
  EXPECT_EQ(upper("ᏸ"), "Ᏸ");
  EXPECT_EQ(upper("\U00010428"), "\U00010400");  // Deseret, four UTF-8 bytes
  EXPECT_EQ(upper("\u0345"), "Ι");
  // Mappings to several code points.
  EXPECT_EQ(upper("ß"), "SS");
  EXPECT_EQ(upper("ŉ"), "ʼN");
  EXPECT_EQ(upper("ﬃ"), "FFI");
  EXPECT_EQ(upper("ᾳ"), "ΑΙ");
  EXPECT_EQ(upper("ΐ"), "Ι\u0308\u0301");
  EXPECT_EQ(upper("你好 👋 1-2"), "你好 👋 1-2");
}

TEST(JinjaCase, LowerMapsAllOfUnicode) {
  EXPECT_EQ(lower("İ"), "i\u0307");
  EXPECT_EQ(lower("ẞ"), "ß");
  EXPECT_EQ(lower("Ꭰ"), "ꭰ");
  EXPECT_EQ(lower("\u212a"), "k");  // Kelvin sign
  EXPECT_EQ(lower("\u2126"), "ω");  // Ohm sign
  EXPECT_EQ(lower("ǅ"), "ǆ");
  EXPECT_EQ(lower("Ⅷ"), "ⅷ");
  EXPECT_EQ(lower("\U00010400"), "\U00010428");
}

TEST(JinjaCase, LowerGivesFinalSigmaAtTheEndOfAWord) {
  EXPECT_EQ(lower("ΟΔΟΣ"), "οδος");
  EXPECT_EQ(lower("Σ"), "σ");        // nothing cased before it
  EXPECT_EQ(lower("ΑΣΑ"), "ασα");    // cased after it
  EXPECT_EQ(lower("ΑΣ."), "ας.");    // '.' is case-ignorable and skipped...
  EXPECT_EQ(lower("ΑΣ.Α"), "ασ.α");  // ...so the 'Α' after it counts
  EXPECT_EQ(title("ΑΣ ΑΣΑ"), "Ας Ασα");
  EXPECT_EQ(capitalize("ΑΣ"), "Ας");
  // jinja2's title filter lowers each word's rest on its own: "Σ" alone.
  EXPECT_EQ(jinja_title("ΑΣ"), "Ασ");
}

TEST(JinjaCase, TitleAndCapitalizeUseTitlecase) {
  EXPECT_EQ(title("ǆ"), "ǅ");
  EXPECT_EQ(title("ǅA"), "ǅa");
  EXPECT_EQ(title("ß"), "Ss");
  EXPECT_EQ(title("ﬁ"), "Fi");
  EXPECT_EQ(title("և"), "Եւ");
  EXPECT_EQ(title("ა"), "ა");  // Georgian Mkhedruli has an upper case, no title case
  EXPECT_EQ(title("ᾳ"), "ᾼ");
  EXPECT_EQ(title("o'neil"), "O'Neil");
  EXPECT_EQ(capitalize("ǆA"), "ǅa");
  EXPECT_EQ(capitalize("ßA"), "Ssa");
  EXPECT_EQ(capitalize("ﬁNE"), "Fine");
  EXPECT_EQ(capitalize("İI"), "İi");
  // The filter upper-cases a word's first character instead.
  EXPECT_EQ(jinja_title("ǆa ß"), "Ǆa SS");
  EXPECT_EQ(jinja_title("ﬁNE-İI"), "FIne-İi");
}

TEST(JinjaCase, InvalidBytesPassThrough) {
  // An invalid byte is neither cased nor case-ignorable, like the lone
  // surrogate Python's surrogateescape makes of it.
  EXPECT_EQ(upper("a\xff"
                  "b\xc3"),
            "A\xff"
            "B\xc3");
  EXPECT_EQ(lower("\xce\x91\xce\xa3\xff"), "\xce\xb1\xcf\x82\xff");
  EXPECT_EQ(lower("\xce\x91\xff\xce\xa3"), "\xce\xb1\xff\xcf\x83");
  EXPECT_EQ(title("a\xff"
                  "b\xc3"),
            "A\xff"
            "B\xc3");
  EXPECT_EQ(title("\xce\x91\xce\xa3\xff"), "\xce\x91\xcf\x82\xff");
  EXPECT_EQ(capitalize("a\xff"
                       "b\xc3"),
            "A\xff"
            "b\xc3");
  EXPECT_EQ(capitalize("\xed\xa0\x80x"), "\xed\xa0\x80x");  // an encoded surrogate
  EXPECT_EQ(upper("\xed\xa0\x80x"), "\xed\xa0\x80X");
  EXPECT_EQ(jinja_title("\xff"
                        "ab"),
            "\xff"
            "ab");
}

}  // namespace
}  // namespace lt::data::jinja
