"""What every text tool-call parser returns, and the readers the formats share.

A parser is a function ``parse(text, tools=None)``: None when ``text`` holds no call in its
format, else a `TextToolCalls` with the text left once the calls are taken out, the calls
(arguments as JSON objects), how each was read and why each unreadable call failed. ``tools``
(the request's OpenAI-style tool list) tells the XML-parameter formats which parameters are
strings; without it a value is read as JSON when it is JSON, else kept as text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tracegen.parsing.toolcall import ParsedToolCall, Strategy, ToolCallParseError, parse_tool_call
from tracegen.schema import ToolCall, ToolFunction, json_value

_NOT_A_NAME = re.compile(r"[\s<>'\"\[\](){}]")

Tools = Sequence[Mapping[str, Any]] | None
"""An OpenAI-style ``tools`` list: ``{"type": "function", "function": {"name", "parameters"}}``."""


@dataclass
class TextToolCalls:
    """What a parser found: the text left, the calls, how each was read, what failed."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    strategies: list[Strategy] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, parsed: ParsedToolCall, call_id: str | None = None) -> None:
        """The call read, unless its name is not a function name (space, quotes, brackets or
        markup in it: model text that only looks like the format), which is a failure."""
        if _NOT_A_NAME.search(parsed.name):
            self.failures.append(f"{parsed.name[:80]!r} is not a function name")
            return
        function = ToolFunction(name=parsed.name, arguments=parsed.arguments, index=len(self.calls))
        self.calls.append(ToolCall(id=call_id, function=function))
        self.strategies.append(parsed.strategy)

    def add_arguments(
        self, name: str, arguments: dict[str, Any], call_id: str | None = None
    ) -> None:
        """A call whose arguments were read without repair."""
        try:
            json_value(arguments)
        except ValueError as e:
            self.failures.append(f"{name}: the arguments hold {e}")
            return
        self.add(ParsedToolCall(name, arguments, "strict"), call_id)

    def finish(self, kept: str) -> TextToolCalls:
        """This result with ``kept`` (stripped) as the text left, when a call was read."""
        if self.calls:
            self.text = kept.strip()
        return self


class Parser(Protocol):
    """Reads one format; None when the text holds no call in that format."""

    def __call__(self, text: str, tools: Tools = None) -> TextToolCalls | None: ...


def read_json_call(payload: str, found: TextToolCalls, call_id: str | None = None) -> None:
    """A ``{"name": …, "arguments": …}`` object (repaired when needed) added to ``found``."""
    try:
        found.add(parse_tool_call(payload), call_id)
    except ToolCallParseError as e:
        found.failures.append(str(e))


def read_named_call(
    name: str, arguments: str, found: TextToolCalls, call_id: str | None = None
) -> None:
    """A call whose name and JSON arguments the format writes apart."""
    name = name.strip()
    if not name:
        found.failures.append("a tool call without a function name")
        return
    body = arguments.strip() or "{}"
    payload = '{"name": ' + orjson.dumps(name).decode() + ', "arguments": ' + body + "}"
    try:
        found.add(parse_tool_call(payload), call_id)
    except ToolCallParseError as e:
        found.failures.append(f"{name}: {e}")


class Closings:
    """Where each bracket of ``text`` closes, brackets inside string literals skipped.

    JSON by default: ``{}`` and ``[]``, double-quoted strings. ``python=True``: ``()`` too, and
    Python's strings (single, double, triple quotes). One scan records the closing of every
    bracket it meets outside a string (a scan started at that bracket would read the same from
    there on), so text full of brackets that never close is scanned about once, not once per
    bracket.
    """

    def __init__(self, text: str, *, python: bool = False) -> None:
        self.text = text
        self.python = python
        self.opening, self.closing = ("([{", ")]}") if python else ("[{", "]}")
        self.quotes = "\"'" if python else '"'
        self.known: dict[int, int | None] = {}

    def at(self, start: int) -> int | None:
        """The index just past the bracket closing the one at ``start``; None if never."""
        if start not in self.known:
            self._scan(start)
        return self.known.get(start)

    def _scan(self, start: int) -> None:
        text, known = self.text, self.known
        opened: list[int] = []
        quote, i, n = "", start, len(text)
        while i < n:
            c = text[i]
            if quote:
                if c == "\\":
                    i += 1
                elif text.startswith(quote, i):
                    i += len(quote) - 1
                    quote = ""
            elif c in self.quotes:
                quote = c * 3 if self.python and text.startswith(c * 3, i) else c
                i += len(quote) - 1
            elif c in self.opening:
                if i in known:  # scanned before: skip to where it closes
                    end = known[i]
                    if end is None:
                        break
                    i = end
                    continue
                opened.append(i)
            elif c in self.closing:
                if not opened:
                    return
                known[opened.pop()] = i + 1
                if not opened:
                    return
            i += 1
        for unclosed in opened:
            known[unclosed] = None


def enclosed(opening: str, *closings: str) -> re.Pattern[str]:
    """A block from ``opening`` to the first of ``closings``: its body is group 1, the
    closing group 2 (empty when the text ends first: a block whose end tag is missing)."""
    ends = "|".join(re.escape(closing) for closing in closings)
    return re.compile(rf"{re.escape(opening)}(.*?)({ends}|\Z)", re.DOTALL)


def balanced_end(text: str, start: int) -> int | None:
    """The index just past the JSON object or array opening at ``start``; None if unclosed."""
    return Closings(text).at(start)


def json_span(text: str, start: int) -> str:
    """The JSON value opening at ``start``: up to its closing bracket, or the rest of the text."""
    end = balanced_end(text, start)
    return text[start:end] if end is not None else text[start:]


def parameter_types(tools: Tools) -> dict[str, dict[str, str]]:
    """Each tool's parameters and their JSON schema type (``string``, ``integer``…)."""
    types: dict[str, dict[str, str]] = {}
    for tool in tools or ():
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        schema = function.get("parameters") or {}
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        types[function["name"]] = {
            key: str(spec.get("type", "")) if isinstance(spec, Mapping) else ""
            for key, spec in (properties or {}).items()
        }
    return types


_STRUCTURED = re.compile(r"\A\s*[\[{]")


def parameter_value(raw: str, kind: str | None) -> Any:
    """A parameter written as text, as the JSON value it stands for.

    A ``string`` parameter stays as written. Another one, or one the schema does not know, is
    read as JSON (``42``, ``true``, ``{"a": 1}``) or as a Python literal when it is a dict or
    list (``{'a': 1}``); text that is neither stays text.
    """
    if kind == "string":
        return raw
    value = raw.strip()
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        pass
    if _STRUCTURED.match(value):
        try:
            literal = ast.literal_eval(value)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return raw
        try:
            return json_value(literal) if isinstance(literal, dict | list) else raw
        except ValueError:
            return raw
    return raw
