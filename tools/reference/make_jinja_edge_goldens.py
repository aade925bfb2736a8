#!/usr/bin/env python3
"""Writes tests/data/fixtures/jinja_edge_goldens.json with jinja2.

Each case is rendered as transformers' apply_chat_template renders a chat
template (ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks),
with MESSAGES as `messages`; tests/data/jinja_edge_test.cpp checks that
lazytrain renders the same text (JinjaEdges.RenderAsJinja2).

The TRANSFORMERS_CASES are rendered by transformers' own compiled template
(its environment overrides filters such as tojson), so they need it too;
they also have TOOLS as `tools`.

The RAISES cases are templates jinja2 raises on; the test checks that each
is an error in lazytrain too (JinjaEdges.WhatJinja2RaisesOnIsAnError). The
REFUSED cases, which lazytrain refuses with an error naming the file and
line, are printed with what jinja2 does with them, for the test's comments.

    python3 -m venv /tmp/jvenv && /tmp/jvenv/bin/pip install jinja2 transformers
    /tmp/jvenv/bin/python tools/reference/make_jinja_edge_goldens.py
"""
import json
import os
import sys

import jinja2
import transformers
from jinja2.sandbox import ImmutableSandboxedEnvironment
from transformers.utils.chat_template_utils import _compile_jinja_template

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "fixtures",
                   "jinja_edge_goldens.json")

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"},
]

# (name, template): one behaviour each.
CASES = [
    ("previtem_and_nextitem",
     "{% for x in [1, 2, 3] %}[{{ loop.previtem is defined }}|{{ loop.previtem }}|"
     "{{ loop.nextitem is defined }}|{{ loop.nextitem }}]{% endfor %}"),
    ("neighbours_of_a_filtered_loop",
     "{% for m in messages if m.role != 'system' %}"
     "{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ m.role }}>"
     "{{ loop.nextitem.role if loop.nextitem is defined else '-' }};{% endfor %}"),
    ("depth",
     "{% for x in [1, 2] %}{% for y in [3] %}{{ loop.depth }}{{ loop.depth0 }},{% endfor %}"
     "{{ loop.depth }}{{ loop.depth0 }};{% endfor %}"),
    ("counters",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
     "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
     "{{ loop['index'] }};{% endfor %}"),
    ("cycle_and_changed",
     "{% for x in [1, 1, 2, 2, 1] %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.changed(x) }},"
     "{% endfor %}|{% for x in [1, 2] %}{{ loop.changed() }}{{ loop.changed() }}"
     "{{ loop.changed(x, 'a') }}{% endfor %}|{% for m in messages %}"
     "{{ loop.changed(m.role == 'user') }}{% endfor %}"),
    ("inner_filter_sees_the_outer_loop",
     "{% for x in [1, 2] %}{% for y in [3, 4] if loop.index > 1 %}{{ y }}{% endfor %}"
     "{% endfor %}"),
    ("loop_is_defined_only_in_a_loop",
     "{% for x in [1] %}{{ loop is defined }}{{ loop is not defined }}{% endfor %}"
     "{{ loop is defined }}{% set loop = 'x' %}{{ loop }}"),
    ("chained_comparisons",
     "{{ 3 > 2 > 1 }}|{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 1 == 1 == 1 }}|{{ 1 < 2 == true }}|"
     "{{ 1 in [1] in [[1]] }}|{{ 1 not in [2] not in [3] }}|{{ 2 < 1 < 'a' }}|"
     "{{ not 1 < 2 < 3 }}|{{ 1 < 2 < 3 and 3 > 2 }}"),
    # Evaluated twice, the middle loop.changed(x) would be false the second time.
    ("chain_evaluates_each_operand_once",
     "{% for x in [1, 2, 2] %}{{ true == loop.changed(x) == true }}{% endfor %}"),
    # A dict's key named like a method that changes it is undefined in
    # transformers' sandbox: jinja2 reads attributes before keys.
    ("sandbox_hides_mutating_methods_and_dunders",
     "{% set d = {'items': [1], 'pop': 2, 'role': 'u'} %}[{{ d.pop }}|{{ d.pop is defined }}|"
     "{{ d['pop'] }}|{{ d['items'] }}|{{ d.role }}|{{ d.zzz }}|{{ [1].append is defined }}|"
     "{{ none.__class__ }}|{{ d.__class__ is defined }}|{{ d.pop | default('x') }}]"),
    ("title_filter_words",
     "{{ 'hello <|im_end|> inside' | title }}|{{ 'a-b(c{d[e<f g_h|i.j' | title }}|"
     "{{ \"o'neil x1y\" | title }}|{{ '  HELLO  wORLD\\tx\u3000y ' | title }}|"
     "{{ \"o'neil x1y\".title() }}"),
    ("string_literal_escapes",
     r"{{ 'a\tb\x41\u00e9\U0001F600\101\\z\q' }}|{{ 'it\'s' }}"),
    ("number_literals",
     "{{ 1_000 }}|{{ 0x1F }}|{{ 0b1_01 }}|{{ 0o17 }}|{{ 1e3 }}|{{ 1.5E-2 }}|{{ 2.5e+1 }}|"
     "{{ 1_0.2_5 }}|{{ 1e308 * 10 }}|{{ 0X_f }}|{{ 3e0|int }}"),
    ("number_edges",
     "{{ 1e400 }}|{{ 1e-400 }}|{{ '\\x1c5\\x1f'|int }}|{{ '\\x1c5'|float }}|"
     "{{ '10'|int(base='16') }}|{{ '10'|int(0, 2.0) }}|{{ '-9.2233720368547758e18'|int }}|"
     "{{ 00 }}|{{ 0_0 }}"),
    ("integer_after_a_dot_is_an_index",
     "{% set x = [[1, [2, 3]], 'ab'] %}{{ x.0 }}|{{ x.0.1 }}|{{ x.0.1.0 }}|{{ x.1.1 }}|"
     "{{ messages.0.role }}|{{ x.0.1[1] }}|{{ x.0.1 | length }}"),
    ("int_filter_as_python_int_then_float",
     "{{ '42'|int }}|{{ ' 42\\n'|int }}|{{ '1_000'|int }}|{{ '3abc'|int }}|{{ '3.7'|int }}|"
     "{{ '1e3'|int }}|{{ '0x1f'|int(0, 16) }}|{{ '0x1f'|int }}|{{ 'z'|int(7) }}|{{ none|int }}|"
     "{{ 3.9|int }}|{{ -3.9|int }}|{{ true|int }}|{{ '-12'|int }}|{{ '+5'|int }}|{{ '010'|int }}|"
     "{{ '010'|int(0, 0) }}|{{ '0b101'|int(0, 0) }}|{{ 'nan'|int }}|{{ 'inf'|int(9) }}|"
     "{{ '1__0'|int }}|{{ '_1'|int }}|{{ '.5'|int }}|{{ '5.'|int }}|{{ [1]|int }}|"
     "{{ 'ff'|int(0, 16) }}|{{ '1_0.5'|int }}|{{ '-0'|int }}|{{ '1E2'|int }}|"
     "{{ 'Infinity'|int(4) }}|{{ ''|int(2) }}|{{ '0x_1f'|int(0, 16) }}|{{ '1.5e1_0'|int }}|"
     "{{ 'z'|int(default=8) }}|{{ 'Z'|int(0, 36) }}|{{ 'nan'|int(6) }}|{{ '12'|int(1, 1) }}|"
     "{{ '9'|int(1, 8) }}|{{ '0b1'|int(0, 16) }}|{{ 'x'|int('d') }}"),
    ("float_filter_as_python_float",
     "{{ '3abc'|float }}|{{ ' 1_0.5 '|float }}|{{ 'inf'|float }}|{{ '-Infinity'|float }}|"
     "{{ 'nan'|float }}|{{ none|float }}|{{ 'x'|float(2.5) }}|{{ true|float }}|{{ 3|float }}|"
     "{{ '1e400'|float }}|{{ '.5e-3'|float }}|{{ '0x10'|float }}|{{ 'x'|float(default='d') }}"),
    ("tuples_print_as_python_tuples",
     "{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{{ ('a', none, true, 1.5) }}|{{ [(1, 'a')] }}|"
     "{{ {'k': (1,)} }}|{{ ((1, 2), [3]) }}|{{ (1, 2)|string }}|{{ (1, 2) ~ '' }}"),
    ("a_tuple_is_not_a_list",
     "{{ (1, 2)|tojson }}|{{ (1, 2)|list }}|{{ (1, 2) == [1, 2] }}|{{ (1, 2) != [1, 2] }}|"
     "{{ (1, 2) == (1, 2.0) }}|{{ [(1, 2)] == [[1, 2]] }}|{{ (1, 2) in [[1, 2]] }}|"
     "{{ (1, 2) in [(1, 2)] }}|{{ (1, 2) < (1, 3) }}"),
    ("tuple_operations_give_tuples",
     "{{ (1, 2) + (3,) }}|{{ (1, 2) * 2 }}|{{ (1, 2)[:1] }}|{{ (1, 2)[::-1] }}|{{ (1, 2)[5:] }}|"
     "{{ (1, 2)[0] }}|{{ (1, 2)|length }}|{{ (1, 2)|first }}|{{ (3, 1, 3)|unique|list }}|"
     "{{ (1, 2)|join('-') }}"),
    ("items_are_tuples",
     "{% set d = {'a': 1, 'b': [2]} %}{{ d|items|list }}|{{ d.items()|list }}|"
     "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}"),
    ("tuples_without_parentheses",
     "{% set t = 1, 2 %}{{ t }}|{% set u = 'x', %}{{ u }}|{% set a, b = 3, 4 %}{{ a }}{{ b }}|"
     "{{ 1, 2 }}|{{ 'a', }}|{% set a, b = (5, 6) %}{{ a }}{{ b }}"),
    ("startswith_a_tuple",
     "{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith(('c',)) }}|"
     "{{ 'abc'.startswith('a') }}"),
    ("macro_arguments",
     "{% macro m(a, b='d') %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}"
     "{{ m(1, b=3) }}{{ m(b=4, a=5) }}{{ m() }}{{ m(none, b=none) }}"
     "{% macro two(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ two(1) }}"
     "{{ two(b=1) }}{% macro none_() %}[]{% endmacro %}{{ none_() }}"
     "{% macro m3(x) %}{{ x }}{% endmacro %}{{ m3(true, ) }}"),
    ("macro_defaults_are_evaluated_at_each_call",
     "{% macro m(a=1, b=a + 1, c=b * 2) %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
     "{{ m() }}|{{ m(5) }}|{{ m(c=0) }}|"
     "{% set x = 'outer' %}{% macro d(a=x, r=messages[0].role) %}{{ a }}-{{ r }}{% endmacro %}"
     "{% for x in ['loop'] %}{{ d() }}{% endfor %}{% set x = 'later' %}{{ d() }}|"
     "{% macro later(a=b, b=1) %}[{{ a }}|{{ b }}]{% endmacro %}{{ later(b=5) }}{{ later() }}"
     "{{ later(1) }}"),
    ("macro_varargs_and_kwargs",
     "{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, z=2) }};"
     "{{ m(1) }};{{ m(1, 2) }};"
     "{% macro k(a) %}{{ kwargs }}{% endmacro %}{{ k(1, a=2) }};"
     "{% macro named(varargs) %}{{ varargs }}{% endmacro %}{{ named(1) }};"
     "{% macro outer() %}{% macro inner() %}{{ varargs }}{% endmacro %}{{ inner() }}"
     "{% endmacro %}{{ outer(1) }};"
     "{% macro both() %}{{ kwargs.x }}|{{ varargs|length }}{% endmacro %}{{ both(1, 2, x=3) }};"
     "{% macro dflt(a=kwargs) %}{{ a }}{{ kwargs }}{% endmacro %}{{ dflt(x=1) }}"),
    ("macro_sees_where_it_was_defined_not_its_caller",
     "{% macro m() %}[{{ x }}]{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}"
     "{% for x in [5] %}{{ m() }}{% set x = 7 %}{{ m() }}{% endfor %}|"
     "{% for y in [5, 6] %}{% macro n() %}{{ y }}/{{ x }}/{{ loop.index }}{% endmacro %}"
     "{% set x = y * 10 %}{{ n() }};{% endfor %}{{ n is defined }}|"
     "{% for y in [1] %}{% macro p() %}{{ z }}{% endmacro %}[{{ p() }}]{% set z = 3 %}"
     "{{ p() }}{% endfor %}|{% macro msgs() %}{{ messages[1].content }}{% endmacro %}"
     "{{ msgs() }}"),
    ("macro_sets_stay_in_the_macro",
     "{% macro m() %}{{ x }}{% set x = 3 %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{{ x }}|"
     "{% set ns = namespace(c=0) %}{% macro bump() %}{% set ns.c = ns.c + 1 %}{% endmacro %}"
     "{{ bump() }}{{ bump() }}{{ ns.c }}|{% macro o() %}{% macro i() %}i{% endmacro %}{{ i() }}"
     "{% endmacro %}{{ o() }}{{ i is defined }}|{% macro first() %}{{ second() }}{% endmacro %}"
     "{% macro second() %}two{% endmacro %}{{ first() }}|{% set first = 3 %}{{ first }}"),
    ("macro_recursion",
     "{% macro m(n) %}{% if n > 0 %}{{ n }},{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(3) }}|"
     "{% macro d(n) %}{{ d(n - 1) if n > 0 else 'deep' }}{% endmacro %}{{ d(150) }}|"
     "{% macro tree(node) %}{{ node.name }}{% if node.kids %}({% for k in node.kids %}"
     "{{ tree(k) }}{{ ',' if not loop.last }}{% endfor %}){% endif %}{% endmacro %}"
     "{{ tree({'name': 'a', 'kids': [{'name': 'b'}, {'name': 'c', 'kids': [{'name': 'd'}]}]}) }}"),
    ("macro_output_in_expressions",
     "{% macro m() %}  x  {% endmacro %}[{{ m()|trim }}]{% set y = m() %}[{{ y }}]"
     "{{ m() ~ 'z' }}{{ m() + 'w' }}{{ m()|length }}{{ m() * 2 }}{{ m() == '  x  ' }}"
     "{{ m() is string }}{{ m()|tojson }}{% set s %}[{{ m() }}]{% endset %}{{ s }}"
     "{{ m()|upper }}{{ m().strip() }}{{ (m() ~ 'a')[2] }}"),
    ("macro_whitespace_control",
     "{%- macro m(a) -%}\n  [{{ a }}]\n{%- endmacro -%}\nA\n{{ m(1) }}\nB\n"
     "{% macro n(a) %}\n  [{{ a }}]\n{% endmacro %}\nC\n{{ n(2) }}\nD\n"
     "    {% macro o() %}\n    o\n    {% endmacro %}\n{{- o() -}}\nE"),
    ("macro_values",
     "{% macro m(a) %}<{{ a }}>{% endmacro %}{{ m }}|{{ m is defined }}|{{ m is callable }}|"
     "{{ 'x' is callable }}|{{ m == m }}|{{ m|string }}|{{ m is sameas m }}|"
     "{% set m2 = m %}{{ m2(3) }}{{ [m][0](4) }}{{ {'f': m}.f(5) }}|"
     "{% set ns = namespace(f=m) %}{{ ns.f(6) }}"),
    ("macro_statements_between_operands",
     "{% set ns = namespace(seq=[1, 2], n=0) %}{% macro bump() %}"
     "{% set ns.seq = ns.seq + [ns.seq|length + 1] %}{% set ns.n = ns.n + 1 %}{{ ns.n }}"
     "{% endmacro %}{{ ns.seq ~ bump() ~ ns.seq }}|{{ ns.seq|join(bump()) }}|"
     "{{ ns.seq[bump()|int] }}|{{ ns.seq[:bump()|int] }}|{{ ns.n is eq(bump()|int) }}|"
     "{{ ns.seq + [bump()] }}|{{ ns.seq }}"),
    ("filters_over_none",
     "{{ none | selectattr('type', 'equalto', 'x') | list }}|{{ none | map(attribute='a') | list }}|"
     "{{ none | select | list }}|{{ '' | reject | list }}|{{ none | rejectattr('a') | list }}"),
]

# A tool list rendered as Qwen3-Coder's template renders one, with macros
# (a list with a default tag name, the keys a schema has beyond the ones
# handled, each tool), written for this test; rendered with TOOLS as
# `tools`.
TOOLS_TEMPLATE = """\
{%- macro render_list(items, tag='required') -%}
{%- if items is defined and items is iterable and items | length > 0 -%}
{%- if tag %}{{ '\\n<' ~ tag ~ '>' }}{% endif -%}
[{%- for item in items -%}
{%- if loop.index > 1 %}, {% endif -%}
{%- if item is string %}`{{ item }}`{% else %}{{ item }}{% endif -%}
{%- endfor -%}]
{%- if tag %}{{ '</' ~ tag ~ '>' }}{% endif -%}
{%- endif -%}
{%- endmacro -%}
{%- macro render_extras(fields, handled) -%}
{%- if fields is mapping -%}
{%- for key in fields if key not in handled -%}
{%- set value = fields[key] -%}
{{ '\\n<' ~ key ~ '>' ~ (value | tojson if value is mapping or (value is sequence and value is \
not string) else value | string) ~ '</' ~ key ~ '>' }}
{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- macro render_tool(tool) -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
<function>
<name>{{ fn.name }}</name>
{%- if fn.description is defined %}
<description>{{ fn.description | trim }}</description>
{%- endif %}
<parameters>
{%- for name, spec in (fn.parameters.properties | default({})) | items %}
<parameter>
<name>{{ name }}</name>
{%- if spec.type is defined %}
<type>{{ spec.type }}</type>
{%- endif %}
{%- if spec.description is defined %}
<description>{{ spec.description | trim }}</description>
{%- endif %}
{{- render_list(spec.enum, 'enum') }}
{{- render_extras(spec, ['type', 'description', 'enum']) }}
</parameter>
{%- endfor %}
{{- render_list(fn.parameters.required) }}
</parameters>
{{- render_extras(fn, ['name', 'description', 'parameters']) }}
</function>
{%- endmacro -%}
{%- if tools is iterable and tools | length > 0 -%}
<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You are a helpful assistant.' }}

# Tools

<tools>
{%- for tool in tools %}
{{ render_tool(tool) }}
{%- endfor %}
</tools>
{%- set names = render_list(tools | map(attribute='function.name') | list, none) %}
Tools: {{ names | trim }} ({{ tools | length }}) {{ render_list([1, 'a'], tag='n') ~ '!' }}<|im_end|>
{%- endif %}
{%- for m in messages if m.role != 'system' %}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{%- endfor %}
"""

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "  Weather for a city. ",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name", "enum": ["Paris", "Oslo"]},
            "days": {"type": "integer", "description": "How many days", "minimum": 1,
                     "examples": [1, 3]},
            "units": {"enum": ["c", "f"], "default": "c", "nullable": True}},
            "required": ["city", "days"]}}},
    {"type": "function", "function": {
        "name": "ping", "parameters": {"type": "object", "properties": {}},
        "strict": True, "meta": {"v": 2}}},
]

# (name, template): rendered by transformers' environment, whose tojson is
# json.dumps(x, ensure_ascii=False, indent=None, separators=None,
# sort_keys=False) rather than jinja2's HTML-safe one.
TRANSFORMERS_CASES = [
    ("tools_rendered_by_macros", TOOLS_TEMPLATE),
    # loopcontrols are transformers' extension.
    ("break_and_continue_in_an_else_are_the_outer_loops",
     "{% for y in [1, 2] %}{% for x in [] %}{% else %}{% if y == 2 %}{% break %}{% endif %}"
     "{% continue %}{% endfor %}never{% endfor %}|{% for y in [1, 2, 3] %}{% for x in [y] %}"
     "{% if x == 2 %}{% break %}{% endif %}{{ x }}{% else %}-{% endfor %}{% endfor %}"),
    ("else_runs_unless_a_body_ran_to_its_end",
     "{% for x in [1, 2] %}{% continue %}{% else %}a{% endfor %}|"
     "{% for x in [1, 2] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% else %}b{% endfor %}|"
     "{% for x in [1, 2] %}{{ x }}{% if x == 1 %}{% continue %}{% endif %}{% else %}c{% endfor %}|"
     "{% for x in [1, 2] %}{% break %}{% else %}d{% endfor %}|"
     "{% for x in [1, 2] if x > 5 %}{% else %}e{% endfor %}"),
    ("tojson_arguments",
     "{% set d = {'b': [1, 'é'], 'a': {'x': none}} %}{{ d|tojson }}|{{ d|tojson(true) }}|"
     "{{ d|tojson(indent=2, separators=(',', '=')) }}|{{ d|tojson(false, 1) }}|"
     "{{ d|tojson(separators=[';', ':'], sort_keys=true) }}|"
     "{{ 'é\\U0001F600<&\\x7f'|tojson(ensure_ascii=true) }}|{{ d|tojson(indent='--') }}|"
     "{{ d|tojson(indent=0) }}|{{ [[], {}]|tojson(indent=2) }}"),
    ("tojson_numbers_and_loose_arguments",
     "{{ 'nan'|float|tojson }}|{{ '-inf'|float|tojson }}|{{ [1.5, 'inf'|float]|tojson }}|"
     "{{ {'a': [1]}|tojson(indent=true) }}|{{ {'a': [1]}|tojson(indent=false) }}|"
     "{{ {'a': [1, 2]}|tojson(separators=';=') }}"),
]

# (name, template): what jinja2 renders or raises here, lazytrain refuses
# with an error naming the file and line (the test checks the messages).
REFUSED = [
    ("unknown_loop_attribute", "{% for x in [1] %}{{ loop.size }}{% endfor %}"),
    ("bare_loop", "{% for x in [1] %}{{ loop }}{% endfor %}"),
    ("uncalled_loop_method", "{% for x in [1] %}{{ loop.cycle }}{% endfor %}"),
    ("cycle_without_items", "{% for x in [1] %}{{ loop.cycle() }}{% endfor %}"),
    ("previtem_of_the_first_item", "{% for m in messages %}{{ loop.previtem.role }}{% endfor %}"),
    ("set_loop_inside_a_loop", "{% for x in [1] %}{% set loop = 2 %}{% endfor %}"),
    ("loop_as_a_for_target", "{% for loop in [1] %}{% endfor %}"),
    ("chain_that_compares_a_number_with_a_string", "{{ 1 < 2 < 'a' }}"),
    ("method_read_as_an_attribute", "{% set d = {'items': [1]} %}{{ d.items }}"),
    ("number_attribute", "{% set n = 3 %}{{ n.real }}"),
    ("macro_reads_caller",
     "{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}in{% endcall %}"),
    ("macro_attribute", "{% macro m() %}{% endmacro %}{{ m.name }}"),
    ("macro_called_after_its_loop_iteration",
     "{% set ns = namespace() %}{% for x in [1, 2] %}{% macro m() %}{{ x }}{% endmacro %}"
     "{% set ns.f = m %}{% endfor %}{{ ns.f() }}"),
]


# (name, template): templates jinja2 raises on, in transformers'
# environment (with loopcontrols: break and continue are its tags).
RAISES = [
    ("cycle_without_items", "{% for x in [1] %}{{ loop.cycle() }}{% endfor %}"),
    ("changed_with_keywords", "{% for x in [1] %}{{ loop.changed(x=1) }}{% endfor %}"),
    ("attribute_of_undefined_previtem",
     "{% for m in messages %}{{ loop.previtem.role }}{% endfor %}"),
    ("set_loop_in_an_if_in_a_loop",
     "{% for x in [1] %}\n{% if x %}{% set loop = 2 %}{% endif %}{% endfor %}"),
    ("set_loop_among_targets", "{% for x in [1] %}{% set a, loop = 1, 2 %}{% endfor %}"),
    ("loop_as_a_second_for_target", "{% for x, loop in [[1, 2]] %}{% endfor %}"),
    ("ordering_a_number_and_a_string", "{{ 1 < 2 < 'a' }}"),
    ("int_of_undefined", "{{ nothing|int }}"),
    ("float_of_undefined", "{{ nothing|float(1) }}"),
    ("int_of_infinity", "{{ (1e308 * 10)|int }}"),
    ("break_outside_a_loop", "{% break %}"),
    ("continue_in_a_for_else", "{% for x in [1] %}{% else %}{% continue %}{% endfor %}"),
    ("set_loop_in_a_for_else", "{% for x in [] %}{% else %}{% set loop = 1 %}{% endfor %}"),
    ("break_in_a_macro_in_a_loop",
     "{% for x in [1] %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}"),
    ("set_loop_in_a_macro_in_a_loop",
     "{% for x in [1] %}{% macro m() %}{% set loop = 1 %}{% endmacro %}{% endfor %}"),
    ("macro_given_too_many_arguments", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
    ("macro_with_a_default_given_too_many", "{% macro m(a, b=2) %}{% endmacro %}{{ m(1, 2, 3) }}"),
    ("macro_given_an_unknown_keyword", "{% macro m(a) %}{% endmacro %}{{ m(1, z=2) }}"),
    ("macro_given_a_parameter_twice", "{% macro m(a) %}{% endmacro %}{{ m(1, a=2) }}"),
    ("macro_with_varargs_given_a_keyword",
     "{% macro m(a) %}{{ varargs }}{% endmacro %}{{ m(1, 2, x=1) }}"),
    ("varargs_bound_before_it_is_read",
     "{% macro m() %}{% set varargs = 1 %}{{ varargs }}{% endmacro %}{{ m(1) }}"),
    ("kwargs_bound_before_it_is_read",
     "{% macro m() %}{% for kwargs in [1] %}{% endfor %}{{ kwargs }}{% endmacro %}{{ m(a=1) }}"),
    ("keyword_argument_repeated", "{% macro m(x) %}{% endmacro %}{{ m(x=1, x=2) }}"),
    ("macro_with_two_parameters_of_a_name", "{% macro m(a, a) %}{% endmacro %}"),
    ("parameter_without_default_after_default", "{% macro m(a=1, b) %}{% endmacro %}"),
    ("macro_without_parentheses", "{% macro m %}x{% endmacro %}"),
    ("macro_parameters_with_a_trailing_comma", "{% macro m(a,) %}{% endmacro %}"),
    ("macro_never_closed", "{% macro m() %}x"),
    ("endmacro_with_a_name", "{% macro m() %}x{% endmacro m %}"),
    ("parameter_named_true", "{% macro m(true) %}{% endmacro %}"),
    ("macro_as_json", "{% macro m() %}{% endmacro %}{{ m|tojson }}"),
    ("macro_called_before_it_is_defined", "{{ m() }}{% macro m() %}x{% endmacro %}"),
    ("macro_reads_loop_of_its_caller",
     "{% macro m() %}{{ loop.index }}{% endmacro %}{% for x in [1] %}{{ m() }}{% endfor %}"),
    ("macro_recursing_forever", "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"),
    ("macro_recursing_too_deep",
     "{% macro d(n) %}{{ d(n - 1) if n > 0 }}{% endmacro %}{{ d(250) }}"),
    ("list_plus_tuple", "{{ [1] + (2,) }}"),
    ("tuple_plus_list", "{{ (1,) + [2] }}"),
    ("ordering_a_tuple_and_a_list", "{{ (1, 2) < [1, 3] }}"),
    ("startswith_a_list", "{{ 'abc'.startswith(['a']) }}"),
]


def cpp_string(text):
    return json.dumps(text, ensure_ascii=False)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    cases = []
    for name, template in CASES:
        text = env.from_string(template).render(messages=MESSAGES)
        cases.append({"name": name, "template": template, "text": text})
    for name, template in TRANSFORMERS_CASES:
        text = _compile_jinja_template(template).render(messages=MESSAGES, tools=TOOLS)
        cases.append({"name": name, "template": template, "text": text})
    raises = []
    for name, template in RAISES:
        try:
            text = _compile_jinja_template(template).render(messages=MESSAGES)
        except Exception as e:
            raises.append({"name": name, "template": template,
                           "jinja2_error": "%s: %s" % (type(e).__name__, e)})
        else:
            sys.exit("%s: jinja2 renders %s instead of raising" % (name, cpp_string(text)))
    header = {
        "made_by": "tools/reference/make_jinja_edge_goldens.py",
        "jinja2_version": jinja2.__version__,
        "transformers_version": transformers.__version__,
        "messages": MESSAGES,
        "tools": TOOLS,
    }
    head = json.dumps(header, ensure_ascii=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(head[:-1] + ', "cases": [\n' +
                ",\n".join(json.dumps(c, ensure_ascii=True) for c in cases) + '\n], "raises": [\n' +
                ",\n".join(json.dumps(r, ensure_ascii=True) for r in raises) + "\n]}\n")
    print("wrote %s: %d cases, %d that raise" % (os.path.normpath(OUT), len(cases), len(raises)))
    for name, template in REFUSED:
        try:
            result = "renders %s" % cpp_string(env.from_string(template).render(messages=MESSAGES))
        except Exception as e:
            result = "raises %s: %s" % (type(e).__name__, e)
        print("// %s: %s\n//   jinja2 %s" % (name, cpp_string(template), result))


if __name__ == "__main__":
    main()
