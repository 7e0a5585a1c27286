import pytest

from tracegen.errors import ConfigError
from tracegen.parsing.tool_parsers import (
    extract_tool_calls,
    get_parser,
    parse_text_tool_calls,
    parser_names,
)
from tracegen.schema import ToolCall

PLAIN = "The answer is 42, since 6 * 7 = 42 and {x} < [y]."


def calls_as_pairs(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.function.name, c.function.arguments) for c in calls]


def test_registry_names_the_known_formats() -> None:
    assert {"hermes", "qwen", "llama3", "mistral"} <= set(parser_names())
    assert get_parser("qwen") is get_parser("hermes")


def test_unknown_parser_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="hermes"):
        get_parser("nope")


@pytest.mark.parametrize("parser", [None, "hermes", "llama3", "mistral"])
def test_text_without_a_call_comes_back_unchanged(parser: str | None) -> None:
    assert extract_tool_calls(PLAIN, parser) == (PLAIN, [])


def test_hermes_reads_several_calls_and_keeps_the_prose() -> None:
    text = (
        "Checking both.\n"
        '<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"q": "a < b"}}</tool_call>'
    )
    rest, calls = extract_tool_calls(text, "hermes")
    assert rest == "Checking both."
    assert calls_as_pairs(calls) == [("python", {"code": "print(1)"}), ("search", {"q": "a < b"})]
    assert [c.function.index for c in calls] == [0, 1]


def test_hermes_repairs_broken_json_and_reports_the_strategy() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "x = 1\nprint(x)"}}'
    found = parse_text_tool_calls(text, "hermes")
    assert calls_as_pairs(found.calls) == [("python", {"code": "x = 1\nprint(x)"})]
    assert found.strategies == ["escaped"]
    assert found.text == ""


def test_hermes_call_that_cannot_be_read_stays_in_the_text_and_is_reported() -> None:
    text = 'Try: <tool_call>{"name": "python", "arguments": {"code": "print(1'
    found = parse_text_tool_calls(text, "hermes")
    assert (found.text, found.calls) == (text, [])
    assert len(found.failures) == 1


def test_llama3_reads_a_whole_message_json_call_with_parameters() -> None:
    text = '{"name": "python", "parameters": {"code": "print(1 < 2)"}}'
    rest, calls = extract_tool_calls(text, "llama3")
    assert rest == ""
    assert calls_as_pairs(calls) == [("python", {"code": "print(1 < 2)"})]


def test_llama3_reads_calls_after_the_python_tag_and_several_joined_by_semicolons() -> None:
    text = (
        "Let me compute.<|python_tag|>"
        '{"name": "python", "parameters": {"code": "1"}}; '
        '{"name": "python", "parameters": {"code": "2"}}<|eom_id|>'
    )
    rest, calls = extract_tool_calls(text, "llama3")
    assert rest == "Let me compute."
    assert [c.function.arguments["code"] for c in calls] == ["1", "2"]


def test_llama3_repairs_raw_newlines_in_the_json() -> None:
    text = '{"name": "python", "parameters": {"code": "def f():\n    return 1"}}'
    assert extract_tool_calls(text, "llama3")[1][0].function.arguments == {
        "code": "def f():\n    return 1"
    }


def test_llama3_does_not_take_plain_json_data_for_a_call() -> None:
    text = '{"name": "Alice", "age": 3}'
    assert extract_tool_calls(text, "llama3") == (text, [])
    assert extract_tool_calls(text) == (text, [])


def test_mistral_reads_a_list_of_calls_with_ids() -> None:
    text = (
        "Running it. [TOOL_CALLS]["
        '{"name": "python", "arguments": {"code": "print(1)"}, "id": "a1b2c3d4e"}, '
        '{"name": "python", "arguments": {"code": "print(2)"}, "id": "f5g6h7i8j"}]</s>'
    )
    rest, calls = extract_tool_calls(text, "mistral")
    assert rest == "Running it."
    assert [(c.id, c.function.arguments["code"]) for c in calls] == [
        ("a1b2c3d4e", "print(1)"),
        ("f5g6h7i8j", "print(2)"),
    ]


def test_mistral_list_with_broken_json_is_repaired() -> None:
    text = '[TOOL_CALLS][{"name": "python", "arguments": {"code": "for i in r:\n\tprint(i)"}}]'
    found = parse_text_tool_calls(text, "mistral")
    assert calls_as_pairs(found.calls) == [("python", {"code": "for i in r:\n\tprint(i)"})]
    assert found.strategies == ["escaped"]


def test_mistral_list_with_unescaped_quotes_is_split_and_extracted() -> None:
    text = (
        '[TOOL_CALLS][{"name": "python", "arguments": {"code": "print("a")"}}, '
        '{"name": "python", "arguments": {"code": "print("b")"}}]'
    )
    found = parse_text_tool_calls(text, "mistral")
    assert [c.function.arguments["code"] for c in found.calls] == ['print("a")', 'print("b")']
    assert found.strategies == ["extracted", "extracted"]


def test_mistral_newer_name_args_form_with_call_ids() -> None:
    text = (
        '[TOOL_CALLS]python[ARGS]{"code": "print(1)\nprint(2)"}'
        '[TOOL_CALLS]python[CALL_ID]abc123XYZ[ARGS]{"code": "3 < 4"}'
    )
    rest, calls = extract_tool_calls(text, "mistral")
    assert rest == ""
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        (None, "python", {"code": "print(1)\nprint(2)"}),
        ("abc123XYZ", "python", {"code": "3 < 4"}),
    ]


def test_mistral_marker_without_a_readable_call_is_reported() -> None:
    found = parse_text_tool_calls("[TOOL_CALLS]python", "mistral")
    assert (found.text, found.calls) == ("[TOOL_CALLS]python", [])
    assert found.failures


def test_without_a_parser_name_each_format_is_tried() -> None:
    hermes = '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
    mistral = '[TOOL_CALLS][{"name": "python", "arguments": {"code": "1"}}]'
    llama = '<|python_tag|>{"name": "python", "parameters": {"code": "1"}}'
    for text in (hermes, mistral, llama):
        assert calls_as_pairs(extract_tool_calls(text)[1]) == [("python", {"code": "1"})]


def test_a_named_parser_ignores_other_formats() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
    assert extract_tool_calls(text, "mistral") == (text, [])


def test_returned_calls_are_schema_tool_calls() -> None:
    _, calls = extract_tool_calls('<tool_call>{"name": "python", "arguments": {}}</tool_call>')
    assert isinstance(calls[0], ToolCall)
    assert calls[0].function.arguments == {}
