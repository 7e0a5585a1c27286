import json

import pytest

from tracegen.parsing.toolcall import (
    ToolCallParseError,
    find_tool_call,
    parse_tool_call,
)

CODE = 'def f(x):\n    if x < 2:\n        return "small"\n    return "big"\n\nprint(f(1))'


def test_valid_json_is_parsed_strictly() -> None:
    call = parse_tool_call('{"name": "python", "arguments": {"code": "print(1)"}}')
    assert (call.name, call.arguments, call.strategy) == ("python", {"code": "print(1)"}, "strict")
    assert call.code == "print(1)"


def test_raw_newlines_and_tabs_in_strings_are_escaped() -> None:
    raw = '{"name": "python", "arguments": {"code": "for i in x:\n\tprint(i)"}}'
    call = parse_tool_call(raw)
    assert (call.code, call.strategy) == ("for i in x:\n\tprint(i)", "escaped")


def test_trailing_commas_are_dropped() -> None:
    call = parse_tool_call('{"name": "python", "arguments": {"code": "x = 1",},}')
    assert (call.code, call.strategy) == ("x = 1", "escaped")


def test_single_quoted_python_dict_is_read() -> None:
    call = parse_tool_call("{'name': 'python', 'arguments': {'code': 'print(\"hi\")'}}")
    assert (call.code, call.strategy) == ('print("hi")', "escaped")


def test_invalid_escape_keeps_its_backslash() -> None:
    call = parse_tool_call(r'{"name": "python", "arguments": {"code": "re.findall(\"\d+\", s)"}}')
    assert call.code == r're.findall("\d+", s)'


def test_missing_and_extra_closing_braces_are_repaired() -> None:
    missing = parse_tool_call('{"name": "python", "arguments": {"code": "x = 1"}')
    extra = parse_tool_call('{"name": "python", "arguments": {"code": "x = 1"}}}')
    assert missing.code == extra.code == "x = 1"


def test_unescaped_quotes_inside_code_are_extracted() -> None:
    raw = '{"name": "python", "arguments": {"code": "d = {"a": "b"}\\nprint(d["a"], "}")"}}'
    call = parse_tool_call(raw)
    assert (call.code, call.strategy) == ('d = {"a": "b"}\nprint(d["a"], "}")', "extracted")


def test_code_written_verbatim_keeps_its_own_escapes() -> None:
    raw = '{"name": "python", "arguments": {"code": "print("a\\nb")\nprint(2)"}}'
    assert parse_tool_call(raw).code == 'print("a\\nb")\nprint(2)'


def test_extraction_allows_other_arguments_after_the_code() -> None:
    raw = '{"name": "python", "arguments": {"code": "print("x")\nx = 1", "timeout": 5}}'
    assert parse_tool_call(raw).code == 'print("x")\nx = 1'


def test_double_escaped_newlines_become_line_breaks_but_string_escapes_stay() -> None:
    raw = '{"name": "python", "arguments": {"code": "x = \\"a\\\\nb\\"\\\\nprint(x)"}}'
    call = parse_tool_call(raw)
    assert call.code == 'x = "a\\nb"\nprint(x)'
    assert call.unescaped and call.strategy == "strict"


def test_fully_double_escaped_code_is_undone_once() -> None:
    raw = '{"name": "python", "arguments": {"code": "print(\\\\\\"a\\\\\\\\nb\\\\\\")\\\\nx = 1"}}'
    assert parse_tool_call(raw).code == 'print("a\\nb")\nx = 1'


def test_newline_escape_inside_a_one_line_program_is_kept() -> None:
    raw = '{"name": "python", "arguments": {"code": "print(\\"a\\\\nb\\")"}}'
    call = parse_tool_call(raw)
    assert (call.code, call.unescaped) == ('print("a\\nb")', False)


def test_arguments_given_as_a_json_string_are_read() -> None:
    raw = '{"name": "python", "arguments": "{\\"code\\": \\"print(2)\\"}"}'
    assert parse_tool_call(raw).arguments == {"code": "print(2)"}


def test_parameters_is_accepted_for_arguments() -> None:
    call = parse_tool_call('{"name": "python", "parameters": {"code": "1"}}')
    assert call.arguments == {"code": "1"}


def test_openai_function_shape_is_read() -> None:
    arguments = json.dumps(json.dumps({"code": "1"}))
    call = parse_tool_call(
        '{"type": "function", "function": {"name": "python", "arguments": ' + arguments + "}}"
    )
    assert (call.name, call.code) == ("python", "1")


def test_markdown_fence_around_the_json_is_ignored() -> None:
    raw = '```json\n{"name": "python", "arguments": {"code": "1"}}\n```'
    assert parse_tool_call(raw).code == "1"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("", "empty"),
        ('{"name": "python", "arguments": {"code": "print(1', "code"),
        ("python\nprint(1)", "name"),
        ('{"arguments": {"code": "1"}}', "name"),
        ('{"name": "python", "arguments": [1]}', "not an object"),
    ],
)
def test_unreadable_calls_raise_with_a_reason(payload: str, reason: str) -> None:
    with pytest.raises(ToolCallParseError, match=reason):
        parse_tool_call(payload)


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(ToolCallParseError, ValueError)


def test_find_tool_call_locates_the_block_and_its_payload() -> None:
    text = 'Run it: <tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call> ok'
    match = find_tool_call(text)
    assert match is not None and match.closed
    assert text[match.start : match.end].startswith("<tool_call>")
    assert text[match.end :] == " ok"
    assert match.payload == '{"name": "python", "arguments": {"code": "1"}}'


def test_find_tool_call_never_cuts_at_a_comparison() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "print(1 <2, 3</4)"}}</tool_call>'
    match = find_tool_call(text)
    assert match is not None
    assert parse_tool_call(match.payload).code == "print(1 <2, 3</4)"


def test_find_tool_call_skips_a_closing_tag_inside_the_code_string() -> None:
    payload = '{"name": "python", "arguments": {"code": "s = \\"</tool_call>\\"\\nprint(s)"}}'
    match = find_tool_call(f"<tool_call>{payload}</tool_call>")
    assert match is not None and match.payload == payload


def test_find_tool_call_with_unescaped_quotes_takes_the_closing_tag_after_the_json() -> None:
    payload = '{"name": "python", "arguments": {"code": "print("</tool_call>")"}}'
    match = find_tool_call(f"<tool_call>{payload}</tool_call>")
    assert match is not None and match.payload == payload
    assert parse_tool_call(match.payload).code == 'print("</tool_call>")'


def test_unclosed_tool_call_runs_to_the_end_of_the_text() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "a < b"}}'
    match = find_tool_call(text)
    assert match is not None and not match.closed
    assert match.end == len(text)
    assert parse_tool_call(match.payload).code == "a < b"


def test_unclosed_tool_call_ends_at_a_tag_after_the_json() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "1"}}<tool_response>{}'
    match = find_tool_call(text)
    assert match is not None and not match.closed
    assert text[match.end :] == "<tool_response>{}"


def test_find_tool_call_finds_the_next_one_from_a_start() -> None:
    one = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    two = '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    first = find_tool_call(one + two)
    assert first is not None
    second = find_tool_call(one + two, first.end)
    assert second is not None and parse_tool_call(second.payload).name == "b"
    assert find_tool_call("no call here") is None


def test_a_realistic_multiline_call_round_trips() -> None:
    raw = json.dumps({"name": "python", "arguments": {"code": CODE}}).replace("\\n", "\n")
    assert parse_tool_call(raw).code == CODE
