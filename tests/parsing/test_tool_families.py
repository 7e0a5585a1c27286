"""Every family's parser on real outputs (vLLM's and SGLang's parser tests, cited per row in
tests/data/toolcalls/families.jsonl) and on text that must not parse as a call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tracegen.parsing import extract_tool_calls
from tracegen.parsing.tool_parsers import PARSERS, parse_text_tool_calls

FAMILIES = Path(__file__).resolve().parents[1] / "data" / "toolcalls" / "families.jsonl"
ROWS: list[dict[str, Any]] = [orjson.loads(line) for line in FAMILIES.read_bytes().splitlines()]


def _pairs(calls: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c.function.name, c.function.arguments) for c in calls]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_each_family_reads_its_own_format(row: dict[str, Any]) -> None:
    found = parse_text_tool_calls(row["text"], row["parser"], row.get("tools"))
    expected = [(c["name"], c["arguments"]) for c in row["calls"]]
    assert _pairs(found.calls) == expected
    assert found.text == row["content"]
    assert len(found.failures) == row.get("failures", 0), found.failures


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["calls"]], ids=[r["id"] for r in ROWS if r["calls"]]
)
def test_without_a_parser_name_every_family_is_still_read(row: dict[str, Any]) -> None:
    rest, calls = extract_tool_calls(row["text"], tools=row.get("tools"))
    assert _pairs(calls) == [(c["name"], c["arguments"]) for c in row["calls"]]
    assert rest == row["content"]


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if not r["calls"] and not r.get("failures")],
    ids=[r["id"] for r in ROWS if not r["calls"] and not r.get("failures")],
)
def test_text_without_a_call_parses_as_no_call_in_any_family(row: dict[str, Any]) -> None:
    for name in PARSERS:
        assert extract_tool_calls(row["text"], name) == (row["text"], []), name


def test_every_family_has_single_or_parallel_calls_and_a_negative_sample() -> None:
    for name in PARSERS:
        rows = [r for r in ROWS if r["parser"] == name]
        assert any(r["calls"] for r in rows), name
    families = {r["parser"] for r in ROWS if not r["calls"]}
    assert families >= set(PARSERS) - {"granite-20b-fc", "minimax_m2"}


def test_call_ids_the_format_writes_are_kept() -> None:
    kimi = next(r for r in ROWS if r["id"] == "kimi_k2-parallel")
    _, calls = extract_tool_calls(kimi["text"], "kimi_k2")
    assert [c.id for c in calls] == [
        "functions.get_weather:0",
        "functions.get_news:1",
        "functions.send_email:2",
    ]
    text = '[TOOL_CALLS]python[CALL_ID]abc123XYZ[ARGS]{"code": "1"}'
    assert extract_tool_calls(text, "mistral")[1][0].id == "abc123XYZ"


def test_a_string_parameter_stays_text_when_the_tools_say_so() -> None:
    text = "<tool_call><function=python><parameter=code>\n42\n</parameter></function></tool_call>"
    schema = {"properties": {"code": {"type": "string"}}}
    tools = [{"function": {"name": "python", "parameters": schema}}]
    assert extract_tool_calls(text, "qwen3_coder")[1][0].function.arguments == {"code": 42}
    assert extract_tool_calls(text, "qwen3_coder", tools)[1][0].function.arguments == {"code": "42"}


@pytest.mark.parametrize(
    ("parser", "text", "reason"),
    [
        ("hermes", '<tool_call>{"name": "python", "arguments": {"code": "print(1', "code"),
        (
            "kimi_k2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f.0"
            "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
            "NAME:INDEX",
        ),
        ("pythonic", "[get_weather('Paris')]", "positional"),
        ("pythonic", "[get_weather(city=lookup())]", "not a literal"),
        ("mistral", "[TOOL_CALLS]python", "name"),
        ("glm45", "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value>", "</tool_call>"),
        (
            "deepseek_v31",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
            '{"code": "x<｜tool▁call▁end｜>',
            "code",
        ),
        ("gemma4", '<|tool_call>call:f{k:[<|"|>a<|"|>}<tool_call|>', "[ never closed"),
        ("gemma4", '<|tool_call>call:f{k:<|"|>a]}<tool_call|>', "quote never closes"),
        ("functiongemma", "<start_function_call>call:f{k:{a:1]}<end_function_call>", "']'"),
        ("inkling", '<|content_invoke_tool_json|>{"name":"d","args":{"k":"v"', "JSON object"),
        ("inkling", '<|content_invoke_tool_json|>{"name":"d","args":[1]}<|end_message|>', "args"),
        (
            "kimi_k3",
            '<|open|>tools<|sep|><|open|>call index="1"<|sep|><|close|>call<|sep|>',
            "name",
        ),
        ("solar_open2", "<|tool_call:start|>f\n<|tool_arg:start|>k<|tool_arg:value|>v", "cut off"),
        ("cohere_command3", '<|START_ACTION|>[{"tool_name": "f"', "JSON list"),
        (
            "minimax_m3",
            ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="f">]<]minimax[>[<a>1'
            "]<]minimax[>[</b>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>",
            "</b>",
        ),
        ("k2_horizon", "<ifm|tool_calls><ifm|tool_call>ping</ifm|tool_call>", "never closed"),
    ],
)
def test_a_malformed_call_is_reported_with_a_reason_and_not_invented(
    parser: str, text: str, reason: str
) -> None:
    found = parse_text_tool_calls(text, parser)
    assert found.calls == []
    assert found.text == text
    assert found.failures and reason in found.failures[0], found.failures


def test_an_inkling_call_without_its_end_marker_ends_where_its_object_closes() -> None:
    text = '<|content_invoke_tool_json|>{"name": "d", "args": {"k": "v"}} and then text'
    rest, calls = extract_tool_calls(text, "inkling")
    assert [(c.function.name, c.function.arguments) for c in calls] == [("d", {"k": "v"})]
    assert rest == "and then text"


def test_a_minimax_m3_string_argument_keeps_its_spaces_and_others_follow_the_schema() -> None:
    ns = "]<]minimax[>["
    text = (
        f'{ns}<tool_call>{ns}<invoke name="write">{ns}<path>a.py{ns}</path>'
        f"{ns}<body>\n    return 1\n{ns}</body>{ns}<mode>0644{ns}</mode>"
        f"{ns}</invoke>{ns}</tool_call>"
    )
    schema = {"properties": {"body": {"type": "string"}, "mode": {"type": "integer"}}}
    tools = [{"function": {"name": "write", "parameters": schema}}]
    _, calls = extract_tool_calls(text, "minimax_m3", tools)
    assert calls[0].function.arguments == {"path": "a.py", "body": "\n    return 1\n", "mode": 644}
