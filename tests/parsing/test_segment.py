import pytest

from tracegen.parsing.segment import segment, strip_system_tags


def kinds_and_texts(text: str) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in segment(text)]


def test_tagged_steps_come_back_typed_and_in_order() -> None:
    text = "<think>plan it</think>\n<code>\nx = 1\n</code>\n<verify>x is 1</verify>"
    assert kinds_and_texts(text) == [("think", "plan it"), ("code", "x = 1"), ("verify", "x is 1")]
    assert all(s.source == "model" for s in segment(text))


def test_every_tag_name_gives_its_step_kind() -> None:
    text = "".join(
        f"<{k}>{k} body</{k}>"
        for k in ("think", "verify", "plan", "reflection", "answer", "result", "error")
    )
    assert [s.kind for s in segment(text)] == [
        "think", "verify", "plan", "reflection", "answer", "result", "error",
    ]  # fmt: skip


def test_unclosed_tag_runs_to_the_end_of_the_text() -> None:
    assert kinds_and_texts("<think>still thinking\nabout it") == [
        ("think", "still thinking\nabout it")
    ]


def test_unclosed_code_block_ends_at_a_tag_that_starts_a_line() -> None:
    text = "<code>\ndef f():\n    return 1\n<verify>f() is 1</verify>"
    assert kinds_and_texts(text) == [("code", "def f():\n    return 1"), ("verify", "f() is 1")]


def test_stray_text_between_tags_becomes_text_and_blank_text_is_dropped() -> None:
    text = "Sure.\n<think>a</think>\n\n   \n<code>b</code> done"
    assert kinds_and_texts(text) == [
        ("text", "Sure."),
        ("think", "a"),
        ("code", "b"),
        ("text", "done"),
    ]


def test_nested_think_is_part_of_the_outer_think() -> None:
    assert kinds_and_texts("<think>a <think>b</think> c</think>") == [("think", "a b c")]


def test_reopened_think_closed_once_does_not_swallow_the_next_block_kind() -> None:
    text = "<think>a <think>b</think>\n<code>x = 1</code>"
    assert kinds_and_texts(text) == [("think", "a b"), ("code", "x = 1")]


def test_empty_blocks_give_no_step() -> None:
    assert segment("<think></think><code>\n\n</code><think> </think>") == []


def test_stray_closing_tags_are_dropped() -> None:
    assert kinds_and_texts("</think>hello</code>") == [("text", "hello")]


def test_blocks_inside_an_open_think_split_it() -> None:
    text = (
        "<think>Let me run it. "
        '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>\n'
        '<tool_response>{"stdout": "1"}</tool_response>\nIt printed 1.</think>'
    )
    assert [s.kind for s in segment(text)] == ["think", "tool_call", "tool_response", "think"]
    assert segment(text)[-1].text == "It printed 1."


def test_closing_an_outer_block_closes_the_blocks_inside_it() -> None:
    assert kinds_and_texts("<think>a<verify>b</think>c") == [
        ("think", "a"),
        ("verify", "b"),
        ("text", "c"),
    ]


def test_markdown_fence_instead_of_code_tag_is_a_code_step_without_the_fence() -> None:
    text = "<think>try this</think>\n```python\ndef f(x):\n    return x\n```\nand done"
    assert kinds_and_texts(text) == [
        ("think", "try this"),
        ("code", "def f(x):\n    return x"),
        ("text", "and done"),
    ]


def test_fence_inside_think_becomes_a_code_step_between_think_steps() -> None:
    text = "<think>draft:\n```\nx = 1\n```\nlooks right</think>"
    assert kinds_and_texts(text) == [
        ("think", "draft:"),
        ("code", "x = 1"),
        ("think", "looks right"),
    ]


def test_fence_of_another_language_stays_text() -> None:
    text = "Output:\n```text\n<think>not a tag</think>\n```\n"
    assert kinds_and_texts(text) == [("text", "Output:\n```text\n<think>not a tag</think>\n```")]


def test_fence_inside_a_code_block_is_stripped() -> None:
    assert kinds_and_texts("<code>\n```python\nx = 1\n```\n</code>") == [("code", "x = 1")]


def test_code_indentation_is_preserved_exactly() -> None:
    code = "class A:\n    def f(self):\n\tpass\n        return  1\n\n    x = 2"
    assert kinds_and_texts(f"<code>\n{code}\n</code>") == [("code", code)]
    assert kinds_and_texts(f"<code>{code}</code>") == [("code", code)]
    assert kinds_and_texts(f"<code>\n{code}\n    </code>") == [("code", code)]


def test_comparisons_and_angle_brackets_never_end_a_code_block() -> None:
    code = "def f(a, b):\n    if a < b and b <= 3 and a</b:\n        return a<b\n    return 1 </ 2"
    assert kinds_and_texts(f"<code>\n{code}\n</code>") == [("code", code)]


def test_closing_tag_inside_a_string_literal_does_not_end_a_code_block() -> None:
    code = (
        "s = '</code>'\n"
        't = "a </code> b"\n'
        'u = """\n</code>\n"""\n'
        "v = f\"{s}</code>\" + r'\\</code>'"
    )
    assert kinds_and_texts(f"<code>\n{code}\n</code>\n<verify>ok</verify>") == [
        ("code", code),
        ("verify", "ok"),
    ]


def test_tag_names_inside_code_strings_are_code() -> None:
    code = 'print("<think>", "<result>", "<tool_call>")'
    assert kinds_and_texts(f"<code>{code}</code>") == [("code", code)]


def test_closing_tag_after_a_comment_ends_a_code_block() -> None:
    assert kinds_and_texts("<code>x = 1  # it's done</code>after") == [
        ("code", "x = 1  # it's done"),
        ("text", "after"),
    ]


def test_unterminated_string_in_code_falls_back_to_the_first_closing_tag() -> None:
    assert kinds_and_texts('<code>s = """oops\n</code>\n<verify>v</verify>') == [
        ("code", 's = """oops'),
        ("verify", "v"),
    ]


def test_tool_call_block_is_not_cut_at_a_comparison_or_a_closing_tag_in_a_string() -> None:
    payload = '{"name": "python", "arguments": {"code": "print(1 < 2, \\"</tool_call>\\")"}}'
    assert kinds_and_texts(f"<tool_call>{payload}</tool_call>") == [("tool_call", payload)]


def test_strip_system_tags_cuts_from_the_first_system_tag_and_counts_blocks() -> None:
    text = "<code>x = 1</code>\n<result>1</result>\n<think>good</think>\n<error>boom</error>"
    assert strip_system_tags(text) == ("<code>x = 1</code>\n", 2)


def test_strip_system_tags_cuts_a_tool_response_the_model_wrote() -> None:
    text = (
        '<think>run <tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
        '<tool_response>{"stdout": "1"}</tool_response> yes</think>'
    )
    clean, count = strip_system_tags(text)
    assert clean.endswith("</tool_call>")
    assert count == 1


def test_strip_system_tags_cuts_after_an_unclosed_tool_call() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "1"}}\n<tool_response>{}'
    assert strip_system_tags(text) == (
        '<tool_call>{"name": "python", "arguments": {"code": "1"}}\n',
        1,
    )


def test_strip_system_tags_keeps_system_tag_names_inside_code() -> None:
    text = '<code>\nprint("<result>", "<error>")\n</code>\n<verify>fine</verify>'
    assert strip_system_tags(text) == (text, 0)


def test_strip_system_tags_leaves_clean_text_unchanged() -> None:
    assert strip_system_tags("<think>a < b</think>") == ("<think>a < b</think>", 0)


def test_unclosed_fence_ends_at_a_line_that_starts_with_a_tag() -> None:
    text = "<think>draft\n```python\nx = 1\n</think>\n<code>x = 2</code>"
    assert kinds_and_texts(text) == [("think", "draft"), ("code", "x = 1"), ("code", "x = 2")]


@pytest.mark.parametrize(("fence", "language"), [("java", "java"), ("cpp", "cpp"), ("C++", "cpp")])
def test_a_fence_of_cpp_or_java_is_a_code_step_naming_its_language(
    fence: str, language: str
) -> None:
    code = "int main() { return 0; }"
    for text in (
        f"Here:\n```{fence}\n{code}\n```\nDone.",
        f"<code>\n```{fence}\n{code}\n```\n</code>",
    ):
        (step,) = [s for s in segment(text) if s.kind == "code"]
        assert (step.text, step.language) == (code, language)
    (plain,) = segment(f"```python\n{code}\n```")
    assert plain.language is None
