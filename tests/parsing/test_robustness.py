import contextlib
import random

import pytest

from tracegen.parsing import (
    ToolCallParseError,
    extract_tool_calls,
    find_tool_call,
    parse_text_tool_calls,
    parse_tool_call,
    segment,
    strip_system_tags,
)

PIECES = [
    "<think>", "</think>", "<code>", "</code>", "<tool_call>", "</tool_call>", "<result>",
    "</result>", "<tool_response>", "<answer>", "```python\n", "```\n", "```text\n", "\n",
    " ", "'", '"', '"""', "\\", "\\n", "#", "{", "}", "[", "]", ",", ":", "x", "<", "</",
    "a<b", '"code"', '"name"', '"python"', '"arguments"', "True", "[TOOL_CALLS]", "[ARGS]",
    "<|python_tag|>", "\t", "\x00", "é", ";", "<|action_start|><|plugin|>", "<function_calls>",
    "<seed:tool_call>", "<function=f>", "function call", '<steptml:invoke name="f">',
    "<｜tool_calls_begin｜>", "<tool_calls>", "f(x=1)", "<|tool_call>call:f{", "<tool_call|>",
    '<|"|>', "<start_function_call>", "<escape>", "<|open|>tools<|sep|>",
    '<|open|>call tool="f"<|sep|>', "<|close|>call<|sep|>", "<|content_invoke_tool_json|>",
    "<|end_message|>", "<tool_sep>", '<function name="f">', '<param name="k">',
    "<|START_ACTION|>", "<|END_ACTION|>", "<|tool_call:start|>", "<|tool_arg:start|>",
    "<|tool_arg:value|>", "<|tool_call:end|>", "<|message|>", "<|eom|>", " to=f",
    "<atem:function_calls>", '<atem:invoke name="f">', "<dots_function_call>",
    "]<]minimax[>[", "<tool_call>", '<invoke name="f">', "<k>", "</k>", "</invoke>",
    "<｜GCML｜tool_calls>", '<｜GCML｜invoke name="f">', "<ifm|tool_calls>", "<ifm|tool_call>",
    "<ifm|arg_key>", "<ifm|arg_value>", "</ifm|tool_call>",
]  # fmt: skip


def garbled_texts(count: int) -> list[str]:
    rng = random.Random(5)
    return ["".join(rng.choices(PIECES, k=rng.randint(0, 50))) for _ in range(count)]


def test_any_model_text_is_read_without_an_unexpected_exception() -> None:
    for text in garbled_texts(3000):
        steps = segment(text)
        clean, count = strip_system_tags(text)
        assert text.startswith(clean) and count >= 0
        assert all(step.text.strip() for step in steps)
        extract_tool_calls(text)
        match = find_tool_call(text)
        for payload in (text, match.payload if match else ""):
            with contextlib.suppress(ToolCallParseError):
                parse_tool_call(payload)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("parser", "text"),
    [
        ("pythonic", " [a(" * 20_000),  # lists that never close
        ("llama4_pythonic", " [a(" * 20_000),
        ("pythonic", " [a(" * 3_000 + ")]" * 3_000),  # lists nested in arguments
        ("deepseek_v31", "<｜tool▁call▁begin｜>" * 20_000),  # calls without a separator
        ("llama3_json", '<|python_tag|>{"name": ' * 20_000),  # objects that never close
        ("glm45", "<tool_call>a" + "<arg_key>" * 20_000 + "</tool_call>"),  # keys never closed
        ("gemma4", "<|tool_call>call:a{" * 20_000),  # calls never closed
        ("gemma4", "<|tool_call>call:a{k:" + "[" * 50_000 + "}<tool_call|>"),  # deep nesting
        ("functiongemma", "<start_function_call>call:a{k:<escape>" * 20_000),
        ("kimi_k3", "<|open|>tools<|sep|>" + '<|open|>call tool="a"<|sep|>' * 20_000),
        ("minicpm5", '<function name="a"><param name="k">' * 20_000),
        ("inkling", "<|content_invoke_tool_json|>{" * 20_000),
        ("hy_v3", "<tool_calls><tool_sep>" + "<tool_call>a<arg_key>" * 20_000),
        ("deepseek_v4", '<｜DSML｜tool_calls><｜DSML｜invoke name="a">' * 20_000),
        ("cohere_command3", "<|START_ACTION|>[{" * 20_000),
        ("solar_open2", "<|tool_call:start|>a" * 20_000),  # names never end, calls never close
        (
            "solar_open2",
            "<|tool_call:start|>a\n" + "<|tool_arg:start|>k<|tool_arg:value|>" * 20_000,
        ),
        ("muse_glimmer", " to=t<|message|><atem:invoke" * 20_000),  # messages never end
        ("muse_glimmer", " " * 200_000 + "<atem:invoke"),  # spaces before no header
        ("dots", "<dots_function_call><invoke name=" * 20_000),
        ("hy_v4", "<tool_calls:x><tool_call:x>a<arg_key:x>" * 20_000),
        ("minimax_m3", ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="a">' * 20_000),
        (
            "minimax_m3",
            ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="a">'
            + "]<]minimax[>[<k>" * 50_000
            + "]<]minimax[>[</invoke>]<]minimax[>[</tool_call>",
        ),
        ("gigachat35", '<｜GCML｜tool_calls><｜GCML｜invoke name="a">' * 20_000),
        ("k2_horizon", "<ifm|tool_call>a<ifm|arg_key>k</ifm|arg_key><ifm|arg_value>" * 20_000),
    ],
    ids=[
        "unclosed",
        "unclosed-llama4",
        "nested",
        "deepseek-no-separator",
        "llama3",
        "glm45",
        "gemma4",
        "gemma4-nested",
        "functiongemma",
        "kimi_k3",
        "minicpm5",
        "inkling",
        "hy_v3",
        "deepseek_v4",
        "cohere",
        "solar_open2",
        "solar_open2-arguments",
        "muse_glimmer",
        "muse_glimmer-spaces",
        "dots",
        "hy_v4",
        "minimax_m3",
        "minimax_m3-nested",
        "gigachat35",
        "k2_horizon",
    ],
)
def test_a_hostile_text_is_read_in_linear_time(parser: str, text: str) -> None:
    _, calls = extract_tool_calls(text, parser=parser)
    assert calls == []


def test_a_list_of_calls_inside_a_broken_call_is_not_read_as_calls() -> None:
    found = parse_text_tool_calls("[outer(x=[inner(y=1)], z=w)]", "pythonic")
    assert found.calls == []
    assert found.failures == ["outer: x is not a literal value"]


def test_a_glm45_call_whose_argument_cannot_be_read_is_reported_not_made_without_it() -> None:
    text = "<tool_call>run<arg_key>code<arg_value>print(1)</arg_value></tool_call>"
    found = parse_text_tool_calls(text, "glm45")
    assert found.calls == []
    assert found.failures == ["run: an <arg_key> without its </arg_key> and <arg_value>"]


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        ("qwen3_coder", "<function=[a( x<parameter='<arg_key>1</parameter></function>"),
        (
            "minimax_m2",
            '<minimax:tool_call><invoke name="run it"></invoke></minimax:tool_call>',
        ),
        ("deepseek_v31", '<｜tool▁call▁begin｜>{"name":<｜tool▁sep｜>{}<｜tool▁call▁end｜>'),
    ],
    ids=["qwen3_coder", "minimax_m2", "deepseek"],
)
def test_a_call_whose_function_name_is_not_a_name_is_reported_not_made(
    parser: str, text: str
) -> None:
    found = parse_text_tool_calls(text, parser)
    assert found.calls == []
    assert found.failures and "not a function name" in found.failures[0]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("parser", "text"),
    [
        ("internlm", "<|action_start|><|plugin|>{" * 20_000),
        ("longcat", "<longcat_tool_call>[" * 20_000 + "</longcat_tool_call>"),
        ("gigachat3", "function call{" * 20_000),
        ("olmo3", "<function_calls>" + "f(x=[" * 20_000),
        ("seed_oss", "<seed:tool_call>" + "<function=" * 20_000),
        ("step3", "<｜tool_calls_begin｜>" + '<steptml:invoke name="f">' * 20_000),
        ("deepseek_v32", "<｜DSML｜function_calls>" + '<｜DSML｜parameter name="a">' * 20_000),
        ("jamba", "<tool_calls>[" + '{"name": ' * 20_000),
        ("lfm2", "<|tool_call_start|>" + "[a(" * 20_000),
        ("apertus", "<|tools_prefix|>" + '[{"a": ' * 20_000),
    ],
    ids=[
        "internlm",
        "longcat",
        "gigachat3",
        "olmo3",
        "seed_oss",
        "step3",
        "dsml",
        "jamba",
        "lfm2",
        "apertus",
    ],
)
def test_a_hostile_text_in_a_newer_family_is_read_in_linear_time(parser: str, text: str) -> None:
    _, calls = extract_tool_calls(text, parser=parser)
    assert calls == []


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        ("olmo3", "<function_calls>get_weather(city=lookup())</function_calls>"),
        ("olmo3", "<function_calls>import os</function_calls>"),
        ("gigachat3", 'function call{"name": "f", "arguments": {"a": '),
        ("step3", '<｜tool_calls_begin｜><steptml:invoke name="run it"></steptml:invoke>'),
        ("internlm", '<|action_start|><|plugin|>{"name": "f x", "parameters": {}}<|action_end|>'),
        ("step3", '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="func">'),
    ],
    ids=[
        "olmo3-not-literal",
        "olmo3-not-a-call",
        "gigachat3-cut",
        "step3-name",
        "internlm-name",
        "step3-cut",
    ],
)
def test_a_newer_family_reports_a_call_it_cannot_read_and_invents_none(
    parser: str, text: str
) -> None:
    found = parse_text_tool_calls(text, parser)
    assert found.calls == []
    assert found.failures
    assert found.text == text
