#!/usr/bin/env python3
"""Writes tests/data/fixtures/chat_template_goldens.json with `transformers`.

For each conversation below it records what transformers' apply_chat_template
gives with Qwen3's own chat_template (tests/data/fixtures/qwen3/
tokenizer_config.json, add_generation_prompt=False): the rendered text and
its ids. tests/data/chat_template_test.cpp checks lazytrain's "qwen3"
template against every id.

It also records the labels an SFT tool trains on, derived from transformers'
output alone: in each assistant turn, the turn's generation prompt is masked
and the rest through <|im_end|> is trained. The generation prompt is the
longest of the ones transformers renders for that conversation
(add_generation_prompt=True with enable_thinking=False:
"<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n"; with thinking on:
"<|im_start|>assistant\\n") that the turn starts with. Everything else is
masked. A token that straddles a trained/masked boundary is an error: the
conversations are chosen so that the boundary falls between tokens.

It also writes two files for the Jinja renderer (src/data/jinja_*,
src/data/chat_template_jinja.*):

- jinja_goldens.json: small templates, one per feature (loops, scoping,
  namespaces, filters, tests, methods, whitespace control, errors), and
  what transformers' own jinja2 environment renders from them (or that it
  raises).
- chat_template_jinja_goldens.json: real chat templates
  (chat_templates/*.jinja and Qwen3's tokenizer_config.json) on several
  conversations: apply_chat_template's text with and without the
  generation prompt, its ids, and the labels. The tokenizer is Qwen3's with
  the other templates' special tokens added (listed in the file, with their
  ids), so every template tokenizes with its control tokens as single ids.
  Labels follow the rule in src/data/chat_template_jinja.h, computed here
  from transformers' renderings, with token offsets from HF tokenizers.

    python3 -m venv /tmp/tplvenv && /tmp/tplvenv/bin/pip install transformers==5.24.0 jinja2
    /tmp/tplvenv/bin/python tools/reference/make_chat_template_goldens.py
"""
import argparse
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                        "fixtures")
IGNORE = -100


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def system(text):
    return {"role": "system", "content": text}


CONVERSATIONS = {
    "single_turn": [user("What is 2+2?"), assistant("It is 4.")],
    "system_message": [
        system("You are a helpful assistant."),
        user("Name a prime number."),
        assistant("7 is prime."),
    ],
    # Assistant turns before the last user turn render without a think block;
    # after it, only the final message gets one (its reasoning is empty).
    "multi_turn": [
        system("Be brief."),
        user("Hi"),
        assistant("Hello!"),
        user("And 1+1?"),
        assistant("2"),
        assistant("Anything else?"),
        user("Say bye in French, please."),
        assistant("Au revoir."),
        assistant("Ça va ? 😀"),
    ],
    # Content with "</think>": split into reasoning and answer.
    "reasoning_in_last_turn": [
        user("What is 2+2?"),
        assistant("<think>\nAdd two and two.\n</think>\n\nIt is 4."),
    ],
    # Before the last user turn the reasoning is dropped (the answer stays,
    # its leading newlines stripped).
    "reasoning_in_history": [
        user("First?"),
        assistant("<think>\nold reasoning\n</think>\n\nFirst answer."),
        user("Second?"),
        assistant("Second answer."),
    ],
    # After the last user turn a non-final message keeps its think block only
    # when it has reasoning.
    "reasoning_after_last_user": [
        user("Plan, then act."),
        assistant("<think>\nstep one\n</think>\nPartial."),
        assistant("No reasoning here."),
        assistant("Done."),
    ],
    # An empty reasoning block written in the content renders as the empty block.
    "empty_reasoning_in_content": [
        user("Hi"),
        assistant("<think>\n\n</think>\n\nPlain answer."),
    ],
    # Several markers: reasoning is what precedes the first "</think>" (after
    # the last "<think>" there); the answer is what follows the last one.
    "several_think_markers": [
        user("Odd markers"),
        assistant("intro <think>a<think>\nreason</think>mid</think>\n\nend"),
    ],
    # "<think>" without "</think>" is not split.
    "think_without_end": [
        user("Keep it"),
        assistant("<think> is a tag."),
        user("Again"),
        assistant("Sure: <think>"),
    ],
    # The final answer's leading newlines are stripped; a space is kept.
    "leading_newlines_and_space": [
        user("x"),
        assistant("\n\n Leading space."),
    ],
    # A user turn that is only a tool response does not count as the last
    # user turn (Qwen3's multi_step_tool rule).
    "tool_response_as_user": [
        user("Question?"),
        assistant("Calling the tool."),
        user("<tool_response>\n42\n</tool_response>"),
        assistant("The answer is 42."),
    ],
    # No user turn at all: no think block anywhere.
    "no_user_turn": [system("Greet."), assistant("Hello there.")],
}


def labels_for(text, offsets, ids, prompts):
    """Labels: assistant turns after their generation prompt, through <|im_end|>."""
    trained_spans = []
    start = 0
    turn_start = "<|im_start|>assistant\n"
    while (begin := text.find(turn_start, start)) >= 0:
        prompt = max((p for p in prompts if text.startswith(p, begin)), key=len)
        end = text.index("<|im_end|>", begin) + len("<|im_end|>")
        trained_spans.append((begin + len(prompt), end))
        start = end
    labels = []
    for token_id, (lo, hi) in zip(ids, offsets):
        inside = [s for s in trained_spans if s[0] <= lo and hi <= s[1]]
        overlaps = [s for s in trained_spans if lo < s[1] and s[0] < hi]
        if overlaps and not inside:
            raise SystemExit("token %d at [%d, %d) straddles a label boundary in %r" %
                             (token_id, lo, hi, text))
        labels.append(token_id if inside else IGNORE)
    return labels


def write_cases(path, header, cases):
    """One case per line, so that a diff shows which case changed."""
    head = json.dumps(header, ensure_ascii=True)
    lines = [json.dumps(case, ensure_ascii=True) for case in cases]
    with open(path, "w", encoding="utf-8") as f:
        f.write(head[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n")
    print("wrote %s: %d cases" % (path, len(cases)))


def render_with_transformers(template, variables):
    """("text", rendered) or ("error", message), as apply_chat_template renders."""
    from transformers.utils.chat_template_utils import _compile_jinja_template
    try:
        return "text", _compile_jinja_template(template).render(**variables)
    except Exception as e:  # raise_exception, type errors: the C++ side must fail too
        return "error", "%s: %s" % (type(e).__name__, e)


M3 = [system("Be brief."), user(" Hi there \n"), assistant("<think>\nr\n</think>\n\nHello!")]

# (name, template, variables): one Jinja feature each.
JINJA_CASES = [
    ("text_and_comment", "plain text {# comment #} more", {}),
    ("output_types", "{{ 1 }} {{ 1.5 }} {{ none }} {{ true }} {{ 'a' }} {{ [1, 'b', none] }} "
     "{{ {'k': [1, 2.0]} }} {{ undefined_name }}|", {}),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} "
     "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'ab' * 3 }} {{ 10 - 4 - 3 }} {{ -3|abs }}", {}),
    ("concatenation", "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 'y' }} {{ [1] + [2] }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ 'b' > 'a' }} {{ 2 >= 3 }} "
     "{{ [1] != [1] }} {{ 'ell' in 'hello' }} {{ 3 not in [1,2] }} {{ 'k' in {'k': 1} }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ not 0 }} {{ not 1 and 0 }} "
     "{{ 'y' if 1 > 2 else 'n' }} {{ 'only' if false }}|", {}),
    ("loop_variables", "{% for m in messages %}{{ loop.index0 }}/{{ loop.index }}/{{ loop.length }}/"
     "{{ loop.first }}/{{ loop.last }}/{{ loop.revindex }}:{{ m.role }};{% endfor %}",
     {"messages": M3}),
    ("loop_else_and_filter", "{% for x in [] %}x{% else %}empty{% endfor %} "
     "{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", {}),
    ("loop_controls", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
     "{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop_over_items", "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}"
     "{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": [2]}}),
    ("loop_scoping", "{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}",
     {}),
    ("nested_loops", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} "
     "{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(n=0, found=false) %}{% for i in [1,2,3] %}"
     "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ ns.found }}", {}),
    ("set_block", "{% set s %}a{{ 1 + 1 }}b{% endset %}[{{ s }}]", {}),
    ("if_elif_else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many"
     "{% endif %} {% endfor %}", {}),
    ("index_and_slice", "{{ messages[0].role }} {{ messages[-1]['role'] }} {{ messages[1:]|length }} "
     "{{ messages[::-1][0].role }} {{ 'hello'[1:3] }} {{ 'hello'[-1] }} {{ [1,2,3,4,5][::2] }} "
     "{{ [1,2,3][5:] }} {{ 'héllo'[1] }}", {"messages": M3}),
    ("string_methods", "{{ m.strip() }}|{{ m.lstrip() }}|{{ m.rstrip() }}|{{ 'xxaxx'.strip('x') }}|"
     "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
     "{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('a') }}"
     "{{ 'ab'.startswith(('x', 'a')) }}|{{ 'a-b'.replace('-', '+') }}|{{ 'hello world'.title() }}|"
     "{{ 'hELLO'.capitalize() }}", {"m": " \t x y \n"}),
    ("qwen3_think_split", "{% set c = m.content %}{% if '</think>' in c %}"
     "{{ c.split('</think>')[-1].lstrip('\\n') }}|"
     "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}{% endif %}",
     {"m": M3[2]}),
    ("dict_methods", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} "
     "{{ d.values()|list }} {{ d['a'] }} {{ d.missing is defined }}", {"d": {"a": 1, "b": "x"}}),
    ("filters", "{{ ' x '|trim }}|{{ [1,2]|length }}|{{ 'héllo'|length }}|{{ 'ab'|upper }}|"
     "{{ undefined_thing|default('dflt') }}|{{ ''|default('e', true) }}|{{ [3,4]|first }}"
     "{{ [3,4]|last }}|{{ ['a','b']|join(', ') }}|{{ 5|string }}|{{ 'abc'|list }}|"
     "{{ [1,2,2]|unique|list }}|{{ [1,2]|reverse|list }}|{{ '3'|int + 1 }}|"
     "{{ 'a b'|replace(' ', '_') }}|{{ 'hello'|capitalize }}|{{ 'x y'|title }}", {}),
    ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é\"\\n'|tojson }}|"
     "{{ [1.5, none, true]|tojson }}", {"d": {"name": "f", "args": {"x": [1, 2], "y": "é"}}}),
    ("select_and_map", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} "
     "{{ messages|map(attribute='role')|join(',') }} "
     "{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }}",
     {"messages": M3}),
    ("tests", "{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is none }}"
     "{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ 3 is odd }}{{ 4 is even }}"
     "{{ 1 is number }}{{ f is false }}{{ t is true }}{{ 6 is divisibleby 3 }}{{ x is not none }}",
     {"x": 1, "n": None, "s": "s", "d": {}, "l": [], "f": False, "t": True}),
    ("whitespace_dashes", "a  {{- 'b' -}}  c\n  {%- if true -%}\n  d  {%- endif %}\n e", {}),
    ("trim_and_lstrip_blocks", "start\n    {% if true %}\n    in\n    {% endif %}\n  {# c #}\n"
     "end {% if true %}x{% endif %}\n+", {}),
    ("lstrip_disabled_by_plus", "a\n    {%+ if true %}x{% endif %}\nb", {}),
    ("output_tags_keep_newlines", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("raise_exception", "{{ raise_exception('bad roles') }}", {}),
    ("special_tokens", "{{ bos_token }}x{{ eos_token }}", {"bos_token": "<s>", "eos_token": "</s>"}),
    ("tools_documents_generation_prompt",
     "{% if add_generation_prompt %}G{% endif %}{% if tools %}T{% endif %}{% if tools is none %}N"
     "{% endif %}{% if documents is not none %}D{{ documents[0].title }}{% endif %}",
     {"add_generation_prompt": True, "tools": None, "documents": [{"title": "t", "text": "x"}]}),
    ("python_repr_of_tools", "{{ tools|string }}",
     {"tools": [{"type": "function", "function": {"name": "f", "it's": True, "n": None}}]}),
    ("filter_binds_tighter", "{{ 'a' + ' b '|trim + 'c' }} {{ [1,2,3]|length - 1 }} "
     "{{ not x is defined }}", {}),
    ("unicode_whitespace_trim", "[{{ s|trim }}][{{ s.strip() }}]", {"s": "\u3000\u00a0 x \u2003\n"}),
    ("message_equality", "{% for m in messages %}{% if m == messages[-1] %}last:{{ m.role }}"
     "{% endif %}{% endfor %}", {"messages": M3}),
    ("undefined_attribute_is_an_error", "{{ nothing.attr }}", {}),
    ("string_plus_number_is_an_error", "{{ 'a' + 1 }}", {}),
]

# The special tokens of the templates below, added to Qwen3's tokenizer as
# special tokens (in this order).
EXTRA_SPECIAL_TOKENS = [
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",  # Llama 3.x
    "<s>", "</s>", "[INST]", "[/INST]",  # Llama 2, Mistral
    "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",  # Gemma
    "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",  # Phi-3
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",  # DeepSeek
    "<|eom_id|>",  # Llama 3.1's end of a tool-call turn
    "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",  # Mistral's tool calling
]

# Template file (under fixtures/) -> (bos_token, eos_token) as the model's
# tokenizer_config.json gives them.
REAL_TEMPLATES = {
    "qwen3/tokenizer_config.json": (None, "<|im_end|>"),
    "chat_templates/qwen2.5.jinja": (None, "<|im_end|>"),
    "chat_templates/llama3.1.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "chat_templates/llama2.jinja": ("<s>", "</s>"),
    "chat_templates/mistral-v0.3.jinja": ("<s>", "</s>"),
    "chat_templates/gemma2.jinja": ("<bos>", "<eos>"),
    "chat_templates/phi3.jinja": ("<s>", "<|endoftext|>"),
    "chat_templates/deepseek-r1-distill.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}

REAL_CONVERSATIONS = {
    "single_turn": [user("What is 2+2?"), assistant("It is 4.")],
    "two_turns_with_spaces": [user("  Hi  "), assistant(" Hello there. "), user("Bye?"),
                              assistant("Bye!\n")],
    "system_first": [system("You are terse."), user("Name a prime."), assistant("7")],
    # "\nText" after a header's newline: byte-level BPE joins the newlines
    # across the label boundary (the slow path of the label search).
    "content_with_leading_newline": [user("x"), assistant("\nStarts on a new line.")],
    "reasoning": [user("Think first."), assistant("<think>\nLet me see.\n</think>\n\nDone."),
                  user("Again?"), assistant("<think>\nAgain.\n</think>\n\nYes.")],
    "unicode": [user("Ça va ? 日本語"), assistant("Très bien 😀")],
    "assistant_first_is_refused_by_some": [assistant("I speak first."), user("ok")],
}


def read_template(relative):
    path = os.path.join(FIXTURES, relative)
    if relative.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            return json.load(f)["chat_template"]
    with open(path, encoding="utf-8") as f:
        return f.read()


def trained_ranges(render, messages, text, specials):
    """The rule of src/data/chat_template_jinja.h, on transformers' renderings."""
    ranges, previous_end = [], 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        stand_in = [dict(m) for m in messages]
        stand_in[i]["content"] = "\x01"
        other = render(stand_in, False)
        if other == text:
            continue
        prefix = 0
        while prefix < min(len(text), len(other)) and text[prefix] == other[prefix]:
            prefix += 1
        suffix = 0
        while (suffix < len(text) - prefix and suffix < len(other) - prefix and
               text[len(text) - 1 - suffix] == other[len(other) - 1 - suffix]):
            suffix += 1
        content_begin, content_end = prefix, len(text) - suffix
        if content_begin < previous_end:
            continue
        best, no_generation_prompt = 0, False
        for disable_thinking in (False, True):
            try:
                plain = render(messages[:i], False)
                prompted = render(messages[:i], True, disable_thinking)
            except Exception:
                continue
            no_generation_prompt = no_generation_prompt or prompted == plain
            if not prompted.startswith(plain) or len(prompted) == len(plain):
                continue
            prompt = prompted[len(plain):]
            at = text.rfind(prompt, previous_end, content_begin)
            if at >= 0:
                best = max(best, at + len(prompt))
        begin = best if best > 0 else content_begin
        blank = begin
        while no_generation_prompt and blank > previous_end and text[blank - 1] == " ":
            blank -= 1
        if 0 < blank < begin and any(text.endswith(s, 0, blank) for s in specials):
            begin = blank  # spaces after a special token, with no generation prompt
        end = after = content_end
        while after < len(text) and text[after] in " \t\n\r":
            after += 1
        matches = [s for s in specials if text.startswith(s, after)]
        if after < len(text) and matches:
            end = after + max(len(s) for s in matches)
        ranges.append((begin, end))
        previous_end = end
    return ranges


def qwen3_with_extra_specials():
    """Qwen3's tokenizer with EXTRA_SPECIAL_TOKENS added as special tokens."""
    from tokenizers import AddedToken
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "qwen3"))
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in EXTRA_SPECIAL_TOKENS],
                         special_tokens=True)
    return tokenizer


def rendered_or_error(case, render, messages):
    """render(messages, False), or None with case["error"] saying what it raised."""
    try:
        return render(messages, False)
    except Exception as e:  # raise_exception, type errors: the C++ side must refuse too
        case["error"] = "%s: %s" % (type(e).__name__, e)
        return None


def real_template_cases(tokenizer):
    specials = [t.content for t in tokenizer.added_tokens_decoder.values() if t.special]
    cases = []
    for relative, (bos, eos) in REAL_TEMPLATES.items():
        template = read_template(relative)
        special = {"bos_token": bos, "eos_token": eos}
        special = {k: v for k, v in special.items() if v is not None}

        def render(messages, add_generation_prompt, disable_thinking=False):
            extra = {"enable_thinking": False} if disable_thinking else {}
            return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                                 add_generation_prompt=add_generation_prompt,
                                                 **special, **extra)

        for name, messages in REAL_CONVERSATIONS.items():
            case = {"template": relative, "conversation": name, "messages": messages}
            text = rendered_or_error(case, render, messages)
            if text is None:
                cases.append(case)
                continue
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = list(tokenizer.apply_chat_template(messages, chat_template=template,
                                                     **special)["input_ids"])
            if ids != encoded["input_ids"]:
                raise SystemExit("%s %s: apply_chat_template ids differ from its text's" %
                                 (relative, name))
            ranges = trained_ranges(render, messages, text, specials)
            labels = [i if any(lo < e and b < hi for b, e in ranges) else IGNORE
                      for i, (lo, hi) in zip(ids, encoded["offset_mapping"])]
            case.update({"text": text, "generation_prompt_text": render(messages, True),
                         "ids": ids, "labels": labels})
            cases.append(case)
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(FIXTURES, "chat_template_goldens.json"))
    args = parser.parse_args()
    import transformers
    from transformers import AutoTokenizer

    qwen3 = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "qwen3"))
    cases = []
    for name, messages in CONVERSATIONS.items():
        text = qwen3.apply_chat_template(messages, tokenize=False)
        ids = list(qwen3.apply_chat_template(messages, tokenize=True)["input_ids"])
        encoded = qwen3(text, add_special_tokens=False, return_offsets_mapping=True)
        if encoded["input_ids"] != ids:
            raise SystemExit("%s: apply_chat_template ids differ from encoding its text" % name)
        rendered = text
        prompts = []
        for thinking in (True, False):
            with_prompt = qwen3.apply_chat_template(messages, tokenize=False,
                                                    add_generation_prompt=True,
                                                    enable_thinking=thinking)
            assert with_prompt.startswith(rendered)
            prompts.append(with_prompt[len(rendered):])
        labels = labels_for(text, encoded["offset_mapping"], ids, prompts)
        cases.append({"name": name, "messages": messages, "text": text, "ids": ids,
                      "labels": labels})
    goldens = {
        "made_by": "tools/reference/make_chat_template_goldens.py",
        "transformers_version": transformers.__version__,
        "chat_template": "tests/data/fixtures/qwen3/tokenizer_config.json",
        "cases": cases,
    }
    header = json.dumps({k: v for k, v in goldens.items() if k != "cases"}, ensure_ascii=True)
    lines = [json.dumps(case, ensure_ascii=True) for case in cases]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(header[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n")
    print("wrote %s: %d conversations" % (args.out, len(cases)))

    jinja_cases = []
    for name, template, variables in JINJA_CASES:
        kind, result = render_with_transformers(template, variables)
        jinja_cases.append({"name": name, "template": template, "variables": variables, kind: result})
    write_cases(os.path.join(FIXTURES, "jinja_goldens.json"),
                {"made_by": "tools/reference/make_chat_template_goldens.py",
                 "transformers_version": transformers.__version__}, jinja_cases)

    tokenizer = qwen3_with_extra_specials()
    # New ids follow the vocabulary; "<s>" and "</s>" are in it already and
    # keep their ids, now as special tokens.
    added = {t: tokenizer.convert_tokens_to_ids(t) for t in EXTRA_SPECIAL_TOKENS}
    write_cases(os.path.join(FIXTURES, "chat_template_jinja_goldens.json"),
                {"made_by": "tools/reference/make_chat_template_goldens.py",
                 "transformers_version": transformers.__version__,
                 "tokenizer": "tests/data/fixtures/qwen3/tokenizer.json plus added_special_tokens",
                 "added_special_tokens": added},
                real_template_cases(tokenizer))


if __name__ == "__main__":
    main()
