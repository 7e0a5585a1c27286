"""Find a ``<tool_call>`` in model text and parse its JSON, repairing it when needed.

The payload ``{"name": "python", "arguments": {"code": "..."}}`` is parsed in order:

- ``strict``: it is JSON.
- ``escaped``: it is JSON once raw newlines, tabs and other control characters inside
  strings are escaped and the usual slips are repaired (trailing commas, single quotes,
  invalid escapes such as ``\\d``, missing or extra closing braces; see `relaxed_json`).
- ``extracted``: the ``code`` value is cut out directly: it ends at the first quote
  after which only the end of the JSON can follow (closing braces, other short
  arguments), so unescaped quotes inside the code are kept. Escapes are undone once,
  unless the value was plainly written verbatim (raw line breaks and bare quotes).

``parameters`` is accepted for ``arguments``, ``arguments`` may be a JSON string, and
the OpenAI shape ``{"function": {"name": ..., "arguments": ...}}`` is read too. When the
code holds ``\\n`` escapes that were meant as line breaks (double escaping), they are
undone (see `break_escaped_lines`) when the code does not parse as Python as it is but
does after, or when it has no line break at all. A call cut off inside the code string
is a failure: a wrong program is worse than none.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from tracegen.parsing.blocks import tool_call_end
from tracegen.parsing.jsonfix import break_escaped_lines, relaxed_json, unescape_once
from tracegen.schema import json_value

Strategy = Literal["strict", "escaped", "extracted"]
STRATEGIES: tuple[Strategy, ...] = ("strict", "escaped", "extracted")

OPEN_TAG = "<tool_call>"
_FENCED = re.compile(r"\A```[\w-]*[ \t]*\r?\n(.*?)(?:\r?\n```)?\s*\Z", re.DOTALL)
_NAME = re.compile(r"""(["'])name\1\s*:\s*(["'])([^"'\n]+)\2""")
_CODE_KEY = re.compile(r"""(["'])code\1\s*:\s*""")
_TAIL = re.compile(r"""(?:\s|[}\],]|(["'])[\w-]+\1\s*:\s*(?:"[^"\n]*"|'[^'\n]*'|[\w.+-]+))*""")


class ToolCallParseError(ValueError):
    """A tool call that no strategy could read; ``str(err)`` is a short reason."""


@dataclass(frozen=True)
class ParsedToolCall:
    """A tool call read from model text, and the strategy that read it."""

    name: str
    arguments: dict[str, Any]
    strategy: Strategy
    unescaped: bool = False

    @property
    def code(self) -> str | None:
        """The ``code`` argument, when it is a string."""
        code = self.arguments.get("code")
        return code if isinstance(code, str) else None


@dataclass(frozen=True)
class ToolCallMatch:
    """Where a ``<tool_call>`` block sits in a text: ``text[start:end]`` is the whole block."""

    start: int
    end: int
    payload: str
    closed: bool


def unfence(text: str) -> str:
    """``text`` stripped, without a markdown fence around it."""
    body = text.strip()
    fenced = _FENCED.match(body)
    return fenced.group(1).strip() if fenced else body


def find_tool_call(text: str, start: int = 0) -> ToolCallMatch | None:
    """The first ``<tool_call>`` block at or after ``start``; an unclosed one ends the text."""
    at = text.find(OPEN_TAG, start)
    if at < 0:
        return None
    body = at + len(OPEN_TAG)
    end = tool_call_end(text, body)
    return ToolCallMatch(at, end.end, text[body : end.body_end], end.closed)


def _worst(a: Strategy, b: Strategy) -> Strategy:
    return max(a, b, key=STRATEGIES.index)


def load_json(text: str) -> tuple[Any, Strategy] | None:
    """``text`` as JSON, strictly or after repair, with the strategy that read it."""
    try:
        return orjson.loads(text), "strict"
    except orjson.JSONDecodeError:
        pass
    fixed = relaxed_json(text)
    if fixed is not None:
        try:
            return orjson.loads(fixed), "escaped"
        except orjson.JSONDecodeError:
            pass
    return None


def _escaped(text: str, i: int) -> bool:
    slashes = 0
    while i > slashes and text[i - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 1


def extract_code(text: str) -> str | None:
    """The ``code`` value cut straight out of broken JSON, or None."""
    key = _CODE_KEY.search(text)
    if key is None:
        return None
    i = key.end()
    delim = next((d for d in ('"""', "'''", '"', "'") if text.startswith(d, i)), None)
    if delim is None:
        return None
    start = j = i + len(delim)
    while (j := text.find(delim, j)) >= 0:
        tail = _TAIL.fullmatch(text, j + len(delim))
        if tail is not None and "}" in tail.group() and not _escaped(text, j):
            raw = text[start:j]
            bare_quote = any(not _escaped(raw, k) for k, c in enumerate(raw) if c == delim)
            return raw if "\n" in raw and bare_quote else unescape_once(raw)
        j += 1
    return None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def undo_double_escapes(code: str) -> tuple[str, bool]:
    """``code`` with ``\\n`` escapes meant as line breaks undone once, and whether it was."""
    if "\\n" not in code or _parses(code):
        return code, False
    fixed = break_escaped_lines(code)
    if "\n" not in code or _parses(fixed):
        return fixed, True
    return code, False


def _arguments(raw: Any) -> tuple[dict[str, Any], Strategy]:
    if raw is None:
        return {}, "strict"
    if isinstance(raw, dict):
        return raw, "strict"
    if not isinstance(raw, str):
        raise ToolCallParseError(f"arguments is a JSON {type(raw).__name__}, not an object")
    if not raw.strip():
        return {}, "strict"
    loaded = load_json(raw)
    if loaded is not None and isinstance(loaded[0], dict):
        return loaded
    code = extract_code(raw)
    if code is None:
        raise ToolCallParseError("arguments is a string that is not a JSON object")
    return {"code": code}, "extracted"


def _read_object(obj: Any, strategy: Strategy) -> ParsedToolCall:
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        raise ToolCallParseError("the tool call is not a JSON object")
    function = obj.get("function")
    if isinstance(function, dict) and "name" in function:
        obj = function
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolCallParseError('the tool call has no "name"')
    raw = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    arguments, arg_strategy = _arguments(raw)
    try:
        json_value(arguments)
    except ValueError as e:
        raise ToolCallParseError(f"the arguments hold {e}") from None
    return ParsedToolCall(name.strip(), arguments, _worst(strategy, arg_strategy))


def _extracted(body: str) -> ParsedToolCall:
    name = _NAME.search(body)
    if name is None:
        raise ToolCallParseError('no "name" found in the tool call')
    code = extract_code(body)
    if code is None:
        raise ToolCallParseError('no complete "code" string found in the tool call')
    return ParsedToolCall(name.group(3).strip(), {"code": code}, "extracted")


def parse_tool_call(payload: str) -> ParsedToolCall:
    """Read the JSON between ``<tool_call>`` and ``</tool_call>``.

    Raises `ToolCallParseError` when no strategy can read it.
    """
    body = unfence(payload)
    if not body:
        raise ToolCallParseError("the tool call is empty")
    loaded = load_json(body)
    return _fix_code(_read_object(*loaded) if loaded is not None else _extracted(body))


def from_json_object(obj: Any, strategy: Strategy = "strict") -> ParsedToolCall:
    """A tool call from JSON already loaded (``strategy``: how it was loaded)."""
    return _fix_code(_read_object(obj, strategy))


def _fix_code(call: ParsedToolCall) -> ParsedToolCall:
    code = call.code
    if code is None:
        return call
    fixed, changed = undo_double_escapes(code)
    if not changed:
        return call
    return ParsedToolCall(call.name, {**call.arguments, "code": fixed}, call.strategy, True)
