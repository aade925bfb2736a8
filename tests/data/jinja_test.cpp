// The Jinja renderer against transformers' own jinja2 environment: each case
// of fixtures/jinja_goldens.json (one feature each, made by
// tools/reference/make_chat_template_goldens.py) renders to the same text,
// or fails where jinja2 raised. Then the errors a user reads: they name the
// template's file and line.
#include "data/jinja_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "tokenizer_fixtures.h"

namespace lt::data::jinja {
namespace {

std::string error_of(const std::string& source, const Value& variables = Value::object()) {
  try {
    Template(source, "t.jinja").render(variables);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, RendersAsTransformersJinja2) {
  // Read in file order: Python dicts keep theirs, and tojson and str() show it.
  std::ifstream in(testing::fixtures_dir() / "jinja_goldens.json");
  const Value goldens = Value::parse(in);
  int checked = 0;
  for (const auto& c : goldens.at("cases")) {
    const std::string name = c.at("name");
    const std::string source = c.at("template");
    const Value& variables = c.at("variables");
    if (c.contains("error")) {
      EXPECT_NE(error_of(source, variables), "") << name << ": jinja2 raised " << c.at("error");
    } else {
      std::string text;
      EXPECT_NO_THROW(text = Template(source, name).render(variables)) << name;
      EXPECT_EQ(text, c.at("text").get<std::string>()) << name;
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(Jinja, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(error_of("a\n{{ raise_exception('roles must alternate') }}"),
            "t.jinja:2: the template raised an error: roles must alternate");
  EXPECT_EQ(error_of("{% include 'f.jinja' %}"),
            "t.jinja:1: unsupported tag {% include %} (the chat-template renderer knows if, for, "
            "set, macro, break, continue and generation)");
  EXPECT_EQ(error_of("{{ x | shuffle }}"), "t.jinja:1: unsupported filter 'shuffle'");
  EXPECT_EQ(error_of("\n\n{% if true %}x"), "t.jinja:3: {% if %} is never closed by {% endif %}");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "t.jinja:1: cannot apply '+' to string and integer");
  EXPECT_EQ(error_of("{{ 'open }}"), "t.jinja:1: a string literal is never closed");
  EXPECT_EQ(error_of("{{ m.content.attr }}", {{"m", Value::object()}}),
            "t.jinja:1: cannot read attribute 'attr' of an undefined value");
}

// jinja2's sandbox (transformers' renderer) refuses a range of more than
// MAX_RANGE = 100000 items: range(100001) and range(0, 300001, 3) raise
// OverflowError there, range(100000) and range(0, 300000, 3) render
// (jinja2 3.1, checked by hand). A template looping 1e8 times ran for
// minutes and took gigabytes here.
TEST(Jinja, RangesAreBoundedAsInJinja2sSandbox) {
  EXPECT_EQ(Template("{{ range(100000)|length }}", "t").render({}), "100000");
  EXPECT_EQ(Template("{{ range(0, 300000, 3)|length }}", "t").render({}), "100000");
  EXPECT_EQ(Template("{{ range(5, -299995, -3)|length }}", "t").render({}), "100000");
  EXPECT_EQ(error_of("\n{% for i in range(100000000) %}x{% endfor %}"),
            "t.jinja:2: range: 1e+08 items, more than the 100000 a template may make (as in "
            "jinja2's sandbox)");
  EXPECT_NE(error_of("{{ range(0, 300001, 3)|length }}"), "");
  EXPECT_NE(error_of("{{ range(-9223372036854775807, 9223372036854775807)|length }}"), "");
  // Two items near the top of int64: stepping past the stop overflowed
  // and the loop ran on (Python: [9223372036854775800, 9223372036854775805]).
  EXPECT_EQ(Template("{{ range(9223372036854775800, 9223372036854775807, 5)|join(',') }}", "t")
                .render({}),
            "9223372036854775800,9223372036854775805");
  EXPECT_EQ(Template("{{ range(-9223372036854775800, -9223372036854775807, -5)|join(',') }}", "t")
                .render({}),
            "-9223372036854775800,-9223372036854775805");
}

TEST(Jinja, GenerationBlocksRenderTheirBody) {
  // transformers' {% generation %} marks assistant text for its masks; the
  // text itself is unchanged.
  EXPECT_EQ(Template("a{% generation %}b{{ 1 }}{% endgeneration %}c", "t").render({}), "ab1c");
}

TEST(Jinja, OneTemplateRendersManyTimes) {
  const Template t("{% for m in messages %}{{ m }}{% endfor %}", "t");
  EXPECT_EQ(t.render({{"messages", {"a", "b"}}}), "ab");
  EXPECT_EQ(t.render({{"messages", {"c"}}}), "c");  // nothing kept from the first rendering
}

}  // namespace
}  // namespace lt::data::jinja
