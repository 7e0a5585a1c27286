"""The tags of every mode, and where a block that holds code or JSON ends.

A ``<code>`` block ends at the first ``</code>`` that is not inside a Python string
literal (comments do not protect it: ``x = 1  # done</code>`` ends the block), or at a
line that starts with a known tag (no Python line starts with ``<``). A ``<tool_call>``
block ends at the first ``</tool_call>`` outside a JSON string, or at a known tag that
starts a line or follows the completed JSON value; when that ``</tool_call>`` does not
follow a ``}`` (unescaped quotes in the code have thrown the string tracking off) and a
later one does, the later one ends it. If the scan ends inside a string (an
unterminated quote has thrown the tracking off), the first exact closing tag is taken.
Anything else — ``x < y``, ``a<b``, ``</`` in a comparison or a string — never ends a
block. With no end at all, the block runs to the end of the text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

PROSE_KINDS = ("think", "verify", "plan", "reflection", "answer")
LITERAL_KINDS = ("code", "tool_call", "tool_response", "result", "error")
SYSTEM_KINDS = ("result", "error", "tool_response")
TAG_NAMES = PROSE_KINDS + LITERAL_KINDS

TAG = re.compile(r"<(/?)(" + "|".join(TAG_NAMES) + r")>")
_LINE_START_TAG = re.compile(r"[ \t]*(<(/?)(" + "|".join(TAG_NAMES) + r")>)")
_CODE_EVENT = re.compile(r"[\\'\"#<\n]")
_PY_STRING = re.compile(r"'''|\"\"\"|'|\"")
_JSON_EVENT = re.compile(r"[\\\"{}\[\]<\n]")
_VALUE_END = re.compile(r"(?:[}\]]|```)\s*\Z")
_VALUE_THEN_CLOSE = re.compile(r"(?:[}\]]|```)\s*(</tool_call>)")


class BlockEnd(NamedTuple):
    """``body_end``: where the block's content stops; ``end``: past its closing tag."""

    body_end: int
    end: int
    closed: bool


def _line_start_tag(text: str, i: int) -> int | None:
    """If a known tag starts the line at ``i``, the index of its ``<``."""
    m = _LINE_START_TAG.match(text, i)
    return m.start(1) if m else None


def _ended_by_tag(text: str, at: int, closing: str) -> BlockEnd:
    """The block ends at the tag at ``at``; its own closing tag is consumed, others are not."""
    if text.startswith(closing, at):
        return BlockEnd(at, at + len(closing), True)
    return BlockEnd(at, at, False)


def _unclosed(text: str) -> BlockEnd:
    return BlockEnd(len(text), len(text), False)


def _fallback(text: str, start: int, closing: str) -> BlockEnd:
    at = text.find(closing, start)
    return _unclosed(text) if at < 0 else BlockEnd(at, at + len(closing), True)


def code_block_end(text: str, start: int) -> BlockEnd:
    """Where the ``<code>`` block whose content begins at ``start`` ends."""
    closing = "</code>"
    i, n = start, len(text)
    quote: str | None = None
    at_line_start = True
    while i < n:
        if quote is None and at_line_start:
            tag_at = _line_start_tag(text, i)
            if tag_at is not None:
                return _ended_by_tag(text, tag_at, closing)
        at_line_start = False
        if quote is None:
            m = _CODE_EVENT.search(text, i)
            if m is None:
                break
            i, c = m.start(), m.group()
            if c == "\n":
                at_line_start = True
                i += 1
            elif c == "\\":
                i += 2
            elif c == "#":
                eol = text.find("\n", i)
                eol = n if eol < 0 else eol
                at = text.find(closing, i, eol)
                if at >= 0:
                    return BlockEnd(at, at + len(closing), True)
                i = eol
            elif c == "<":
                if text.startswith(closing, i):
                    return BlockEnd(i, i + len(closing), True)
                i += 1
            else:
                quote = _PY_STRING.match(text, i).group()  # type: ignore[union-attr]
                i += len(quote)
            continue
        c = text[i]
        if c == "\\":
            i += 2
        elif text.startswith(quote, i):
            i += len(quote)
            quote = None
        elif c == "\n" and len(quote) == 1:
            quote = None
            at_line_start = True
            i += 1
        else:
            i += 1
    return _fallback(text, start, closing) if quote else _unclosed(text)


def tool_call_end(text: str, start: int) -> BlockEnd:
    """Where the ``<tool_call>`` block whose payload begins at ``start`` ends."""
    end = _scan_tool_call(text, start)
    if end.closed and not _VALUE_END.search(text, start, end.body_end):
        later = _VALUE_THEN_CLOSE.search(text, end.end)
        if later is not None:
            return BlockEnd(later.start(1), later.end(1), True)
    return end


def _scan_tool_call(text: str, start: int) -> BlockEnd:
    closing = "</tool_call>"
    i, n = start, len(text)
    in_string = False
    depth = 0
    value_done = False
    at_line_start = True
    while i < n:
        if at_line_start and not in_string:
            tag_at = _line_start_tag(text, i)
            if tag_at is not None:
                return _ended_by_tag(text, tag_at, closing)
        at_line_start = False
        m = _JSON_EVENT.search(text, i)
        if m is None:
            break
        i, c = m.end(), m.group()
        if c == "\\":
            i += 1
        elif c == '"':
            in_string = not in_string
        elif c == "\n":
            at_line_start = True
        elif in_string:
            continue
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            value_done = depth <= 0
        elif text.startswith(closing, i - 1) or (value_done and TAG.match(text, i - 1)):
            return _ended_by_tag(text, i - 1, closing)
    return _fallback(text, start, closing) if in_string else _unclosed(text)


def simple_block_end(text: str, start: int, name: str) -> BlockEnd:
    """Where a block of system text (``result``, ``error``, ``tool_response``) ends."""
    return _fallback(text, start, f"</{name}>")


def block_end(text: str, start: int, name: str) -> BlockEnd:
    """Where the literal block ``name`` whose content begins at ``start`` ends."""
    if name == "code":
        return code_block_end(text, start)
    if name == "tool_call":
        return tool_call_end(text, start)
    return simple_block_end(text, start, name)
