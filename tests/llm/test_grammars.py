"""The modes' protocol grammars, checked through their regular-expression form (the same
language as the GBNF llama.cpp is given)."""

from __future__ import annotations

import re

import pytest

from tracegen.llm.grammar import Alt, Expr, Grammar, Lit, Ref, Rep, Seq
from tracegen.modes.grammars import GRAMMARS, INLINE_CONTINUE, INLINE_START, MARKERS, THINK_CODE


def accepts(grammar: Grammar, text: str) -> bool:
    return re.fullmatch(grammar.regex, text) is not None


CODE = "def f(a, b):\n    if a < b and a<=b or a << 1 > b:\n        return '<'\n    return b\n"


def test_code_may_hold_comparisons_and_shifts() -> None:
    assert accepts(THINK_CODE, f"<think>a < b is the test</think>\n<code>\n{CODE}</code>")


def test_prose_may_not_open_a_system_tag() -> None:
    assert not accepts(THINK_CODE, "<think>x</think><result>ok</result><code>\nx\n</code>")
    assert not accepts(THINK_CODE, "<think><result>ok</think>\n<code>x</code>")


def test_markers_ends_with_one_verify_after_interleaved_steps() -> None:
    text = "<think>a</think>\n<code>\nx = 1\n</code>\n<think>b</think>\n<code>\ny = 2\n</code>\n"
    assert accepts(MARKERS, text + "<verify>ok</verify>")
    assert not accepts(MARKERS, text)
    assert not accepts(MARKERS, "<code>\nx\n</code>\n<verify>ok</verify>")


def test_markdown_fences_are_not_part_of_the_protocol() -> None:
    assert not accepts(THINK_CODE, "<think>x</think>\n<code>\n```python\nx = 1\n```\n</code>")


def test_inline_tools_calls_are_strict_json_with_escaped_code() -> None:
    call = '<tool_call>{"name": "python", "arguments": {"code": "print(1 < 2)\\nx = \\"a\\""}}'
    assert accepts(INLINE_START, "<think>let me run it\n" + call + "</tool_call>")
    assert not accepts(
        INLINE_START,
        '<think><tool_call>{"name": "python", "arguments": '
        '{"code": "print(1)\nraw newline"}}</tool_call>',
    )
    assert accepts(INLINE_CONTINUE, f"\nit prints True.</think>\n<code>\n{CODE}</code>")


@pytest.mark.parametrize("code", [r"print(\"<\")", r"x = a<\ny = 1", r"a <\u0041"])
def test_a_tool_calls_code_may_hold_a_less_than_before_a_quote_or_an_escape(code: str) -> None:
    call = '<tool_call>{"name": "python", "arguments": {"code": "' + code + '"}}</tool_call>'
    assert accepts(INLINE_START, "<think>run it\n" + call)


def test_a_tool_calls_code_may_not_hold_an_escaped_closing_tag() -> None:
    call = r'<tool_call>{"name": "python", "arguments": {"code": "s = \"<\/x>\""}}</tool_call>'
    assert not accepts(INLINE_START, "<think>run it\n" + call)


@pytest.mark.parametrize("grammar", list(GRAMMARS.values()), ids=list(GRAMMARS))
def test_every_grammar_has_gbnf_and_a_stable_hash(grammar: Grammar) -> None:
    assert grammar.gbnf.startswith("root ::= ")
    assert len(grammar.sha256) == 64
    assert grammar.sha256 == Grammar(grammar.name, dict(grammar.rules)).sha256


def _nullable(e: Expr, rules: dict[str, Expr], seen: frozenset[str] = frozenset()) -> bool:
    if isinstance(e, Lit):
        return e.text == ""
    if isinstance(e, Ref):
        return e.name not in seen and _nullable(rules[e.name], rules, seen | {e.name})
    if isinstance(e, Seq):
        return all(_nullable(i, rules, seen) for i in e.items)
    if isinstance(e, Alt):
        return any(_nullable(o, rules, seen) for o in e.options)
    if isinstance(e, Rep):
        return e.low == 0 or _nullable(e.item, rules, seen)
    return False


def _repetitions(e: Expr) -> list[Rep]:
    parts = {Seq: "items", Alt: "options"}.get(type(e))
    inner = list(getattr(e, parts)) if parts else [e.item] if isinstance(e, Rep) else []
    return ([e] if isinstance(e, Rep) else []) + [r for i in inner for r in _repetitions(i)]


@pytest.mark.parametrize("grammar", list(GRAMMARS.values()), ids=list(GRAMMARS))
def test_a_repeated_part_is_never_empty_nor_of_free_length(grammar: Grammar) -> None:
    """So a reply is read one way only: llama.cpp's sampler follows every reading at once, and
    a tool call's string that could be cut into parts many ways cost seconds a token."""
    for rule in grammar.rules.values():
        for rep in _repetitions(rule):
            item = rep.item
            while isinstance(item, Ref):
                item = grammar.rules[item.name]
            assert not _nullable(item, grammar.rules), f"{grammar.name}: {rep.gbnf()}"
            free = isinstance(item, Rep) and item.low != item.high
            assert not free, f"{grammar.name}: {rep.gbnf()}"
