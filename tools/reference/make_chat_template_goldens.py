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

    scripts/setup-test-venv.sh && .venv/bin/pip install jinja2
    .venv/bin/python tools/reference/make_chat_template_goldens.py
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


if __name__ == "__main__":
    main()
