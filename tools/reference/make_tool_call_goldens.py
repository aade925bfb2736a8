#!/usr/bin/env python3
"""Writes tests/data/fixtures/chat_template_tool_goldens.json with `transformers`.

Tool-calling conversations as a dataset row holds them (OpenAI-style
messages with `tool_calls`, `tool` turns, the row's `tools`), rendered by
transformers' apply_chat_template(messages, tools=tools) with the Qwen2.5,
Qwen3 and Llama 3.1 chat templates of tests/data/fixtures: the text, its ids
and the labels a supervised fine-tune trains on; and the prompt that asks for
the final answer (apply_chat_template of the turns before it with
add_generation_prompt=True, enable_thinking=False).

The labels are derived from transformers' text alone, by each template's turn
markers, not by lazytrain's rule: in every assistant turn, the generation
prompt (the longest of those add_generation_prompt=True renders, with and
without enable_thinking=False, that the turn starts with) is masked and the
rest, through the end-of-turn token, is trained: the tool calls, the
reasoning, the answer. Tool results, tools and prompts are masked.

The tokenizer is Qwen3's with the other templates' special tokens added, as
make_chat_template_goldens.py does (the ids are listed in that script's
goldens, chat_template_jinja_goldens.json, which the test reads too).

    /path/to/venv/bin/python tools/reference/make_tool_call_goldens.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_chat_template_goldens import (FIXTURES, IGNORE, qwen3_with_extra_specials,  # noqa: E402
                                        read_template, rendered_or_error, write_cases)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "local_time", "description": "The local time in a city.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}},
}


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# (name, row): the row as a dataset's JSONL line holds it.
ROWS = [
    ("two_calls_then_answer", {
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Weather in Paris, and the time in Tokyo?"},
            # Arguments as an object (keys not sorted: the row's order is kept)
            # and as the JSON string OpenAI's API writes.
            {"role": "assistant", "content": "",
             "tool_calls": [call("get_weather", {"unit": "celsius", "city": "Paris"}),
                            call("local_time", "{\"city\": \"Tokyo\"}")]},
            {"role": "tool", "name": "get_weather", "content": "18 degrees, cloudy"},
            {"role": "tool", "name": "local_time", "content": "21:04"},
            {"role": "assistant", "content": "Paris: 18 degrees and cloudy. Tokyo: 21:04."},
        ]}),
    ("content_beside_a_call", {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Is it cold in Oslo?"},
            {"role": "assistant", "content": "Let me check.",
             "tool_calls": [call("get_weather", {"city": "Oslo"})]},
            {"role": "tool", "content": "-3 degrees, snow"},
            {"role": "assistant", "content": "Yes: -3 degrees and snowing."},
        ]}),
    ("reasoning_content_field", {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Rome?"},
            {"role": "assistant", "content": "", "reasoning_content": "The user wants Rome's weather.",
             "tool_calls": [call("get_weather", {"city": "Rome"})]},
            {"role": "tool", "content": "25 degrees"},
            {"role": "assistant", "reasoning_content": "Report it.", "content": "25 degrees in Rome."},
        ]}),
    # OpenAI's API writes "content": null beside tool calls: Qwen2.5 and
    # Llama 3.1 render it; Qwen3's template raises (it looks for "</think>"
    # in None), so the row is refused.
    ("null_content_beside_a_call", {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Lima?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "get_weather", "arguments": {"city": "Lima"}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "19 degrees"},
            {"role": "assistant", "content": "19 degrees in Lima."},
        ]}),
    # No tools: a tokenizer's "default" template renders it.
    ("no_tools", {"messages": [{"role": "user", "content": "Hi"},
                               {"role": "assistant", "content": "Hello."}]}),
    # No content at all: the turn is its role and its calls.
    ("no_content_beside_a_call", {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Quito?"},
            {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Quito"})]},
            {"role": "tool", "content": "14 degrees"},
            {"role": "assistant", "content": "14 degrees in Quito."},
        ]}),
]

# LLaMA-Factory's ShareGPT layout of a tool call (its "function_call" and
# "observation" turns, the row's "system" and "tools" as a JSON string), and
# the OpenAI-style messages it stands for, which transformers renders.
LLAMA_FACTORY_ROWS = [
    ("llama_factory_function_call", {
        "conversations": [
            {"from": "human", "value": "Is it cold in Oslo?"},
            {"from": "function_call", "value": json.dumps({"name": "get_weather",
                                                           "arguments": {"city": "Oslo"}})},
            {"from": "observation", "value": "-3 degrees, snow"},
            {"from": "gpt", "value": "Yes: -3 degrees and snowing."},
        ],
        "system": "You report the weather.",
        "tools": json.dumps([WEATHER_TOOL]),
    }, {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "system", "content": "You report the weather."},
            {"role": "user", "content": "Is it cold in Oslo?"},
            {"role": "assistant", "content": "",
             "tool_calls": [call("get_weather", {"city": "Oslo"})]},
            {"role": "tool", "content": "-3 degrees, snow"},
            {"role": "assistant", "content": "Yes: -3 degrees and snowing."},
        ]}),
]

# Mistral's layout wants nine-character call ids, echoed by the tool turns.
MISTRAL_ROWS = [
    ("mistral_two_calls", {
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Paris, and the time in Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call00001", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "call00002", "type": "function",
                 "function": {"name": "local_time", "arguments": {"city": "Tokyo"}}}]},
            {"role": "tool", "tool_call_id": "call00001", "content": "18 degrees"},
            {"role": "tool", "tool_call_id": "call00002", "content": "21:04"},
            {"role": "assistant", "content": "18 degrees in Paris; 21:04 in Tokyo."},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
        ]}),
    # Mistral writes the system text into the last user turn: a prompt of
    # the turns before the answer is no prefix of the whole conversation.
    ("mistral_system", {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
    ]}),
]


def turns(turn_start, *turn_ends):
    """Spans of each assistant turn: after its generation prompt through its end token."""
    def spans(text, prompts):
        found, start = [], 0
        while (begin := text.find(turn_start, start)) >= 0:
            prompt = max((p for p in prompts if text.startswith(p, begin)), key=len)
            end = min(text.index(e, begin) + len(e) for e in turn_ends if e in text[begin:])
            found.append((begin + len(prompt), end))
            start = end
        return found
    return spans


def mistral_spans(text, prompts):
    """Mistral has no assistant header: a turn is "[TOOL_CALLS] [...]</s>", or
    the answer after "[/INST]" or "[/TOOL_RESULTS]" through "</s>"."""
    found, start = [], 0
    while (eos := text.find("</s>", start)) >= 0:
        begin = max(text.rfind("[TOOL_CALLS]", start, eos),
                    *(text.rfind(m, start, eos) + len(m) for m in ("[/INST]", "[/TOOL_RESULTS]")
                      if text.rfind(m, start, eos) >= 0))
        found.append((begin, eos + len("</s>")))
        start = eos + len("</s>")
    return found


# Template -> (bos, eos, the trained spans of a text, the rows it renders).
# Llama 3.1 takes one call a turn and has no reasoning.
ONE_CALL = ("two_calls_then_answer", "reasoning_content_field")
TEMPLATES = {
    "chat_templates/qwen2.5.jinja": (None, "<|im_end|>", turns("<|im_start|>assistant\n", "<|im_end|>"), ()),
    "qwen3/tokenizer_config.json": (None, "<|im_end|>", turns("<|im_start|>assistant\n", "<|im_end|>"), ()),
    # A tokenizer with two templates (as Hermes 2 Pro's and Command R's): a
    # plain "default" and Qwen2.5's as "tool_use", which transformers takes
    # whenever tools are given.
    "chat_templates/default_and_tool_use.json": (
        None, "<|im_end|>", turns("<|im_start|>assistant\n", "<|im_end|>"), ()),
    "chat_templates/eom_after_calls.jinja": (
        "<|begin_of_text|>", "<|eot_id|>",
        turns("<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", "<|eom_id|>"), ()),
    "chat_templates/llama3.1.jinja": (
        "<|begin_of_text|>", "<|eot_id|>",
        turns("<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"), ONE_CALL),
    "chat_templates/mistral-v0.3.jinja": ("<s>", "</s>", mistral_spans, "mistral"),
}


def labels_of(spans, offsets, ids, text):
    labels = []
    for token_id, (lo, hi) in zip(ids, offsets):
        inside = any(b <= lo and hi <= e for b, e in spans)
        if not inside and any(lo < e and b < hi for b, e in spans):
            raise SystemExit("a token straddles a label boundary at [%d, %d) in %r" % (lo, hi, text))
        labels.append(token_id if inside else IGNORE)
    return labels


def main():
    import transformers

    tokenizer = qwen3_with_extra_specials()
    cases = []
    for relative, (bos, eos, spans_of, skipped) in TEMPLATES.items():
        template = read_template(relative)
        if isinstance(template, list):  # named templates: transformers chooses by the tools
            tokenizer.chat_template = {t["name"]: t["template"] for t in template}
            template = None
        special = {k: v for k, v in {"bos_token": bos, "eos_token": eos}.items() if v is not None}
        rows = [(name, row, row) for name, row in ROWS] + LLAMA_FACTORY_ROWS
        if skipped == "mistral":
            rows = [(name, row, row) for name, row in MISTRAL_ROWS + ROWS if name in
                    ("mistral_two_calls", "mistral_system", "no_tools")]
        for name, row, rendered_row in rows:
            if name in skipped:
                continue
            messages, tools = rendered_row["messages"], rendered_row.get("tools")

            def render(msgs, prompt, **extra):
                return tokenizer.apply_chat_template(msgs, tools=tools, chat_template=template,
                                                     tokenize=False, add_generation_prompt=prompt,
                                                     **special, **extra)

            case = {"template": relative, "conversation": name, "row": row}
            text = rendered_or_error(case, render, messages)
            if text is None:
                cases.append(case)
                continue
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = encoded["input_ids"]
            prompts = []
            for i, m in enumerate(messages):
                if m["role"] != "assistant":
                    continue
                plain = render(messages[:i], False)
                for extra in ({}, {"enable_thinking": False}):
                    prompted = render(messages[:i], True, **extra)
                    assert prompted.startswith(plain)
                    prompts.append(prompted[len(plain):])
            labels = labels_of(spans_of(text, prompts), encoded["offset_mapping"], ids, text)
            # The prompt generation and evaluation ask with: the turns before
            # the final answer as training renders them, up to that answer's
            # trained span (after Qwen3's masked empty think block; without
            # the system text Mistral's template writes only into a last
            # user turn).
            # A final answer with reasoning trains its think block, so its
            # span starts before "<think>", where a prompt (with no answer to
            # know that of) does not: such rows have no prompt golden.
            case.update({"text": text, "ids": ids, "labels": labels})
            if not any(messages[-1].get(k) for k in ("reasoning_content", "thinking", "reasoning")):
                last_span = spans_of(text, prompts)[-1]
                offsets = encoded["offset_mapping"]
                case["prompt_ids"] = ids[:next(k for k, (lo, _) in enumerate(offsets)
                                               if lo >= last_span[0])]
            # The prompt of the first user turn alone, with the row's tools
            # (generate --prompt TEXT --tools FILE): transformers' default
            # generation prompt, after which Qwen3's template lays out a tool
            # call that results follow (no think block).
            if messages[0]["role"] == "user":
                first = render(messages[:1], True)
                case["first_turn_prompt_ids"] = tokenizer(first, add_special_tokens=False)["input_ids"]
            cases.append(case)
    write_cases(os.path.join(FIXTURES, "chat_template_tool_goldens.json"),
                {"made_by": "tools/reference/make_tool_call_goldens.py",
                 "transformers_version": transformers.__version__,
                 "tokenizer": "tests/data/fixtures/qwen3/tokenizer.json plus the added special "
                              "tokens of chat_template_jinja_goldens.json"}, cases)


if __name__ == "__main__":
    main()
