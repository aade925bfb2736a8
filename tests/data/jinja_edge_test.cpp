// What a user test found the Jinja renderer doing differently from jinja2,
// against jinja2 itself: loop.previtem/nextitem/depth/cycle/changed,
// chained comparisons, the title filter, tuples and macros (with a tool
// list rendered by macros in Qwen3-Coder's manner) render as transformers'
// jinja2 environment renders them (fixtures/jinja_edge_goldens.json, written by
// tools/reference/make_jinja_edge_goldens.py), what jinja2 raises on is an
// error, and what the renderer does not reproduce is an error naming the
// file and line, never a silent "".
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "data/jinja_template.h"
#include "tokenizer_fixtures.h"

namespace lt::data::jinja {
namespace {

// What tools/reference/make_jinja_edge_goldens.py wrote: the messages, the
// cases with jinja2's text, and the templates jinja2 raises on.
const Value& goldens() {
  static const Value kGoldens = [] {
    std::ifstream in(testing::fixtures_dir() / "jinja_edge_goldens.json");
    return Value::parse(in);
  }();
  return kGoldens;
}

// The conversation the goldens script renders every case with.
const Value& messages() {
  return goldens().at("messages");
}

std::string error_of(const std::string& source) {
  try {
    Template(source, "t.jinja").render({{"messages", messages()}});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaEdges, RenderAsJinja2) {
  int checked = 0;
  for (const Value& c : goldens().at("cases")) {
    const std::string name = c.at("name");
    // With the tools the script renders its transformers cases with.
    const Value variables = {{"messages", messages()}, {"tools", goldens().at("tools")}};
    std::string text;
    try {
      text = Template(c.at("template").get<std::string>(), name).render(variables);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
    EXPECT_EQ(text, c.at("text").get<std::string>()) << name;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(JinjaEdges, WhatJinja2WouldRenderDifferentlyIsRefused) {
  // jinja2's decimal literals have no leading zeros (a syntax error there).
  EXPECT_EQ(error_of("{{ 01 }}"), "t.jinja:1: the integer 01 has a leading zero");
  EXPECT_EQ(error_of("{{ 0_1 }}"), "t.jinja:1: the integer 0_1 has a leading zero");
  // Python's integers have no bound; lazytrain's stop at 64 bits.
  EXPECT_EQ(error_of("{{ '99999999999999999999'|int }}"),
            "t.jinja:1: int: '99999999999999999999' does not fit in 64 bits");
  // jinja2 renders "" for an unknown attribute of loop, "<LoopContext 1/1>"
  // for a bare loop and a bound method's repr for an uncalled one.
  EXPECT_EQ(error_of("{% for x in [1] %}\n{{ loop.size }}{% endfor %}"),
            "t.jinja:2: loop has no attribute 'size' (jinja2's loop has index, index0, revindex, "
            "revindex0, first, last, length, depth, depth0, previtem, nextitem, cycle() and "
            "changed())");
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop['size'] }}{% endfor %}"),
            error_of("{% for x in [1] %}{{ loop.size }}{% endfor %}"));
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop }}{% endfor %}"),
            "t.jinja:1: 'loop' can only be read as loop.<attribute>, loop.cycle(...), "
            "loop.changed(...) or with 'is defined'");
  EXPECT_EQ(error_of("{% for x in [1] %}{% set l = loop %}{% endfor %}"),
            error_of("{% for x in [1] %}{{ loop }}{% endfor %}"));
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop.cycle }}{% endfor %}"),
            "t.jinja:1: loop.cycle is a method; call it: loop.cycle(...)");
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop.items() }}{% endfor %}"),
            "t.jinja:1: loop has no method 'items' (it has cycle() and changed())");
  // jinja2 reads Python's attribute before the key: a bound method, 3.
  EXPECT_EQ(error_of("{% set d = {'items': [1]} %}{{ d.items }}"),
            "t.jinja:1: '.items' on this mapping is Python's attribute in jinja2, not a key, "
            "which the renderer does not support (a method is supported as a call, "
            ".items(...); a key as ['items'])");
  EXPECT_EQ(error_of("{% set n = 3 %}\n{{ n.real }}"),
            "t.jinja:2: '.real' on this integer is Python's attribute in jinja2, not a key, "
            "which the renderer does not support (a method is supported as a call, .real(...); "
            "a key as ['real'])");
  EXPECT_NE(error_of("{{ 'ab'.upper }}"), "");
  // jinja2 renders a call block, the name of a macro, and a macro kept
  // past its loop iteration as its sentinel "missing".
  EXPECT_EQ(error_of("{% macro m() %}\n{{ caller() }}{% endmacro %}"),
            "t.jinja:1: macro 'm' reads 'caller', which only {% call %} gives; {% call %} is not "
            "supported");
  EXPECT_EQ(error_of("{% call m() %}{% endcall %}"),
            "t.jinja:1: unsupported tag {% call %} (the chat-template renderer knows if, for, set, "
            "macro, break, continue and generation)");
  EXPECT_EQ(error_of("{% macro m() %}{% endmacro %}{{ m.name }}"),
            "t.jinja:1: cannot read attribute 'name' of a macro");
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% for x in [1, 2] %}{% macro m() %}{{ x }}"
                     "{% endmacro %}{% set ns.f = m %}{% endfor %}\n{{ ns.f() }}"),
            "t.jinja:2: macro 'm' is called after the for loop iteration that defined it ended, "
            "which the renderer does not support");
}

TEST(JinjaEdges, WhatJinja2RaisesOnIsAnError) {
  for (const Value& c : goldens().at("raises")) {
    EXPECT_NE(error_of(c.at("template").get<std::string>()), "")
        << c.at("name").get<std::string>() << ": jinja2 raises "
        << c.at("jinja2_error").get<std::string>();
  }
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop.cycle() }}{% endfor %}"),
            "t.jinja:1: loop.cycle() needs items to cycle");
  EXPECT_EQ(error_of("{% for x in [1] %}{{ loop.changed(x=1) }}{% endfor %}"),
            "t.jinja:1: loop.changed() takes no keyword arguments");
  EXPECT_EQ(error_of("{% for m in messages %}{{ loop.previtem.role }}{% endfor %}"),
            "t.jinja:1: cannot read attribute 'role' of an undefined value");
  EXPECT_EQ(error_of("{% for x in [1] %}\n{% if x %}{% set loop = 2 %}{% endif %}{% endfor %}"),
            "t.jinja:2: cannot assign to the special variable 'loop' inside a for loop");
  EXPECT_EQ(error_of("{% for x in [1] %}{% set a, loop = 1, 2 %}{% endfor %}"),
            "t.jinja:1: cannot assign to the special variable 'loop' inside a for loop");
  EXPECT_EQ(error_of("{% for x, loop in [[1, 2]] %}{% endfor %}"),
            "t.jinja:1: cannot assign to the special variable 'loop' inside a for loop");
  EXPECT_EQ(error_of("{% for x in [] %}{% else %}\n{% set loop = 1 %}{% endfor %}"),
            "t.jinja:2: cannot assign to the special variable 'loop' inside a for loop");
  EXPECT_EQ(error_of("{% for x in [1] %}{% else %}{% break %}{% endfor %}"),
            "t.jinja:1: {% break %} outside a for loop's body");
  EXPECT_NE(error_of("{{ 1 < 2 < 'a' }}"), "");
  // jinja2's TypeError from Macro.__call__, and a RecursionError.
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}\n{{ m(1, 2) }}"),
            "t.jinja:2: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, a=2) }}"),
            "t.jinja:1: macro 'm' takes no keyword argument 'a'");
  EXPECT_EQ(error_of("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"),
            "t.jinja:1: macro calls nest more than 190 deep (jinja2 stops near there with a "
            "RecursionError)");
  EXPECT_EQ(error_of("{% macro m(a=1, b) %}{% endmacro %}"),
            "t.jinja:1: a parameter without a default after one with a default");
  // jinja2: UndefinedError; OverflowError (outside what the int filter catches).
  EXPECT_EQ(error_of("{{ nothing|int }}"), "t.jinja:1: int: the value is undefined");
  EXPECT_EQ(error_of("{{ nothing|float(1) }}"), "t.jinja:1: float: the value is undefined");
  EXPECT_EQ(error_of("{{ (1e308 * 10)|int }}"),
            "t.jinja:1: int: cannot convert float infinity to integer");
}

}  // namespace
}  // namespace lt::data::jinja
