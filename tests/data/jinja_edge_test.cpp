// What a user test found the Jinja renderer doing differently from jinja2,
// against jinja2 itself: loop.previtem/nextitem/depth/cycle/changed,
// chained comparisons and the title filter render as transformers' jinja2
// environment renders them (the goldens are printed by
// tools/reference/make_jinja_edge_goldens.py), and what the renderer does
// not reproduce is an error naming the file and line, never a silent "".
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/jinja_template.h"

namespace lt::data::jinja {
namespace {

// The conversation the goldens script renders every case with.
Value messages() {
  Value list = Value::array();
  for (const auto& [role, content] : {std::pair{"system", "Be brief."}, std::pair{"user", "Hi"},
                                      std::pair{"assistant", "Hello!"}, std::pair{"user", "Bye"}})
    list.push_back({{"role", role}, {"content", content}});
  return list;
}

std::string error_of(const std::string& source) {
  try {
    Template(source, "t.jinja").render({{"messages", messages()}});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Golden {
  const char* name;
  const char* source;
  const char* jinja2_text;
};

TEST(JinjaEdges, RenderAsJinja2) {
  const Golden goldens[] = {
      {"previtem_and_nextitem",
       "{% for x in [1, 2, 3] %}[{{ loop.previtem is defined }}|{{ loop.previtem }}|{{ "
       "loop.nextitem is defined }}|{{ loop.nextitem }}]{% endfor %}",
       "[False||True|2][True|1|True|3][True|2|False|]"},
      {"neighbours_of_a_filtered_loop",
       "{% for m in messages if m.role != 'system' %}{{ loop.previtem.role if loop.previtem is "
       "defined else '-' }}>{{ m.role }}>{{ loop.nextitem.role if loop.nextitem is defined else "
       "'-' }};{% endfor %}",
       "->user>assistant;user>assistant>user;assistant>user>-;"},
      {"depth",
       "{% for x in [1, 2] %}{% for y in [3] %}{{ loop.depth }}{{ loop.depth0 }},{% endfor %}{{ "
       "loop.depth }}{{ loop.depth0 }};{% endfor %}",
       "10,10;10,10;"},
      {"counters",
       "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
       "}}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop['index'] }};{% endfor %}",
       "1032TrueFalse31;2121FalseFalse32;3210FalseTrue33;"},
      {"cycle_and_changed",
       "{% for x in [1, 1, 2, 2, 1] %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.changed(x) }},{% "
       "endfor %}|{% for x in [1, 2] %}{{ loop.changed() }}{{ loop.changed() }}{{ loop.changed(x, "
       "'a') }}{% endfor %}|{% for m in messages %}{{ loop.changed(m.role == 'user') }}{% endfor "
       "%}",
       "aTrue,bFalse,cTrue,aFalse,bTrue,|TrueFalseTrueTrueFalseTrue|TrueTrueTrueTrue"},
      {"inner_filter_sees_the_outer_loop",
       "{% for x in [1, 2] %}{% for y in [3, 4] if loop.index > 1 %}{{ y }}{% endfor %}{% endfor "
       "%}",
       "34"},
      {"loop_is_defined_only_in_a_loop",
       "{% for x in [1] %}{{ loop is defined }}{{ loop is not defined }}{% endfor %}{{ loop is "
       "defined }}{% set loop = 'x' %}{{ loop }}",
       "TrueFalseFalsex"},
      {"chained_comparisons",
       "{{ 3 > 2 > 1 }}|{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 1 == 1 == 1 }}|{{ 1 < 2 == true }}|{{ 1 "
       "in [1] in [[1]] }}|{{ 1 not in [2] not in [3] }}|{{ 2 < 1 < 'a' }}|{{ not 1 < 2 < 3 }}|{{ "
       "1 < 2 < 3 and 3 > 2 }}",
       "True|True|False|True|False|True|True|False|False|True"},
      {"chain_evaluates_each_operand_once",
       "{% for x in [1, 2, 2] %}{{ true == loop.changed(x) == true }}{% endfor %}",
       "TrueTrueFalse"},
      {"sandbox_hides_mutating_methods_and_dunders",
       "{% set d = {'items': [1], 'pop': 2, 'role': 'u'} %}[{{ d.pop }}|{{ d.pop is defined }}|{{ "
       "d['pop'] }}|{{ d['items'] }}|{{ d.role }}|{{ d.zzz }}|{{ [1].append is defined }}|{{ "
       "none.__class__ }}|{{ d.__class__ is defined }}|{{ d.pop | default('x') }}]",
       "[|False|2|[1]|u||False||False|x]"},
      {"title_filter_words",
       "{{ 'hello <|im_end|> inside' | title }}|{{ 'a-b(c{d[e<f g_h|i.j' | title }}|{{ \"o'neil "
       "x1y\" | title }}|{{ '  HELLO  wORLD\\tx　y ' | title }}|{{ \"o'neil x1y\".title() }}",
       "Hello <|im_end|> Inside|A-B(C{D[E<F G_h|i.j|O'neil X1y|  Hello  World\tX　Y |O'Neil X1Y"},
      {"string_literal_escapes", "{{ 'a\\tb\\x41\\u00e9\\U0001F600\\101\\\\z\\q' }}|{{ 'it\\'s' }}",
       "a\tbAé😀A\\z\\q|it's"},
      {"filters_over_none",
       "{{ none | selectattr('type', 'equalto', 'x') | list }}|{{ none | map(attribute='a') | list "
       "}}|{{ none | select | list }}|{{ '' | reject | list }}|{{ none | rejectattr('a') | list }}",
       "[]|[]|[]|[]|[]"},
      {"number_literals",
       "{{ 1_000 }}|{{ 0x1F }}|{{ 0b1_01 }}|{{ 0o17 }}|{{ 1e3 }}|{{ 1.5E-2 }}|{{ 2.5e+1 }}|{{ "
       "1_0.2_5 }}|{{ 1e308 * 10 }}|{{ 0X_f }}|{{ 3e0|int }}",
       "1000|31|5|15|1000.0|0.015|25.0|10.25|inf|15|3"},
      {"number_edges",
       "{{ 1e400 }}|{{ 1e-400 }}|{{ '\\x1c5\\x1f'|int }}|{{ '\\x1c5'|float }}|{{ "
       "'10'|int(base='16') }}|{{ '10'|int(0, 2.0) }}|{{ '-9.2233720368547758e18'|int }}|{{ 00 "
       "}}|{{ 0_0 }}",
       "inf|0.0|0|0.0|10|10|-9223372036854775808|0|0"},
      {"integer_after_a_dot_is_an_index",
       "{% set x = [[1, [2, 3]], 'ab'] %}{{ x.0 }}|{{ x.0.1 }}|{{ x.0.1.0 }}|{{ x.1.1 }}|{{ "
       "messages.0.role }}|{{ x.0.1[1] }}|{{ x.0.1 | length }}",
       "[1, [2, 3]]|[2, 3]|2|b|system|3|2"},
      {"int_filter_as_python_int_then_float",
       "{{ '42'|int }}|{{ ' 42\\n'|int }}|{{ '1_000'|int }}|{{ '3abc'|int }}|{{ '3.7'|int }}|{{ "
       "'1e3'|int }}|{{ '0x1f'|int(0, 16) }}|{{ '0x1f'|int }}|{{ 'z'|int(7) }}|{{ none|int }}|{{ "
       "3.9|int }}|{{ -3.9|int }}|{{ true|int }}|{{ '-12'|int }}|{{ '+5'|int }}|{{ '010'|int }}|{{ "
       "'010'|int(0, 0) }}|{{ '0b101'|int(0, 0) }}|{{ 'nan'|int }}|{{ 'inf'|int(9) }}|{{ "
       "'1__0'|int }}|{{ '_1'|int }}|{{ '.5'|int }}|{{ '5.'|int }}|{{ [1]|int }}|{{ 'ff'|int(0, "
       "16) }}|{{ '1_0.5'|int }}|{{ '-0'|int }}|{{ '1E2'|int }}|{{ 'Infinity'|int(4) }}|{{ "
       "''|int(2) }}|{{ '0x_1f'|int(0, 16) }}|{{ '1.5e1_0'|int }}|{{ 'z'|int(default=8) }}|{{ "
       "'Z'|int(0, 36) }}|{{ 'nan'|int(6) }}|{{ '12'|int(1, 1) }}|{{ '9'|int(1, 8) }}|{{ "
       "'0b1'|int(0, 16) }}|{{ 'x'|int('d') }}",
       "42|42|1000|0|3|1000|31|0|7|0|3|-3|1|-12|5|10|10|5|0|9|0|0|0|5|0|255|10|0|100|4|2|31|"
       "15000000000|8|35|6|12|9|177|d"},
      {"float_filter_as_python_float",
       "{{ '3abc'|float }}|{{ ' 1_0.5 '|float }}|{{ 'inf'|float }}|{{ '-Infinity'|float }}|{{ "
       "'nan'|float }}|{{ none|float }}|{{ 'x'|float(2.5) }}|{{ true|float }}|{{ 3|float }}|{{ "
       "'1e400'|float }}|{{ '.5e-3'|float }}|{{ '0x10'|float }}|{{ 'x'|float(default='d') }}",
       "0.0|10.5|inf|-inf|nan|0.0|2.5|1.0|3.0|inf|0.0005|0.0|d"},
      // transformers' tojson (ensure_ascii, indent, separators, sort_keys).
      {"tojson_arguments",
       "{% set d = {'b': [1, 'é'], 'a': {'x': none}} %}{{ d|tojson }}|{{ d|tojson(true) }}|{{ "
       "d|tojson(indent=2, separators=(',', '=')) }}|{{ d|tojson(false, 1) }}|{{ "
       "d|tojson(separators=[';', ':'], sort_keys=true) }}|{{ "
       "'é\\U0001F600<&\\x7f'|tojson(ensure_ascii=true) }}|{{ d|tojson(indent='--') }}|{{ "
       "d|tojson(indent=0) }}|{{ [[], {}]|tojson(indent=2) }}",
       "{\"b\": [1, \"é\"], \"a\": {\"x\": null}}|{\"b\": [1, \"\\u00e9\"], \"a\": {\"x\": "
       "null}}|{\n  \"b\"=[\n    1,\n    \"é\"\n  ],\n  \"a\"={\n    \"x\"=null\n  }\n}|{\n \"b\": "
       "[\n  1,\n  \"é\"\n ],\n \"a\": {\n  \"x\": null\n "
       "}\n}|{\"a\":{\"x\":null};\"b\":[1;\"é\"]}|\"\\u00e9\\ud83d\\ude00<&\\u007f\"|{\n--\"b\": "
       "[\n----1,\n----\"é\"\n--],\n--\"a\": {\n----\"x\": null\n--}\n}|{\n\"b\": "
       "[\n1,\n\"é\"\n],\n\"a\": {\n\"x\": null\n}\n}|[\n  [],\n  {}\n]"},
      {"tojson_numbers_and_loose_arguments",
       "{{ 'nan'|float|tojson }}|{{ '-inf'|float|tojson }}|{{ [1.5, 'inf'|float]|tojson }}|{{ "
       "{'a': [1]}|tojson(indent=true) }}|{{ {'a': [1]}|tojson(indent=false) }}|{{ {'a': [1, "
       "2]}|tojson(separators=';=') }}",
       "NaN|-Infinity|[1.5, Infinity]|{\n \"a\": [\n  1\n ]\n}|{\n\"a\": [\n1\n]\n}|{\"a\"=[1;2]}"},
  };
  for (const Golden& g : goldens) {
    std::string text;
    EXPECT_NO_THROW(text = Template(g.source, g.name).render({{"messages", messages()}})) << g.name;
    EXPECT_EQ(text, g.jinja2_text) << g.name;
  }
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
}

TEST(JinjaEdges, WhatJinja2RaisesOnIsAnError) {
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
  EXPECT_NE(error_of("{{ 1 < 2 < 'a' }}"), "");
  // jinja2: UndefinedError; OverflowError (outside what the int filter catches).
  EXPECT_EQ(error_of("{{ nothing|int }}"), "t.jinja:1: int: the value is undefined");
  EXPECT_EQ(error_of("{{ nothing|float(1) }}"), "t.jinja:1: float: the value is undefined");
  EXPECT_EQ(error_of("{{ (1e308 * 10)|int }}"),
            "t.jinja:1: int: cannot convert float infinity to integer");
}

}  // namespace
}  // namespace lt::data::jinja
