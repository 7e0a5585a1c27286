"""Recover tool calls a model wrote as text instead of structured ``tool_calls``.

- ``hermes`` (alias ``qwen``): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  several per message; the last one may be unclosed.
- ``llama3``: the whole message is ``{"name": ..., "parameters": {...}}`` (several joined
  by ``;``, or a JSON list), optionally after ``<|python_tag|>``.
- ``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``, or the newer
  ``[TOOL_CALLS]name[ARGS]{...}`` (with ``[CALL_ID]id`` before ``[ARGS]`` if present).

The JSON inside is read with the repairs of `parse_tool_call`. A call in a recognised
wrapper that still cannot be read stays in the remaining text and is listed in
``failures``, so the caller can tell the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from tracegen.errors import ConfigError
from tracegen.parsing.toolcall import (
    ParsedToolCall,
    Strategy,
    ToolCallParseError,
    find_tool_call,
    from_json_object,
    load_json,
    parse_tool_call,
    unfence,
)
from tracegen.schema import ToolCall, ToolFunction


@dataclass
class TextToolCalls:
    """What a parser found: the text left, the calls, how each was read, what failed."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    strategies: list[Strategy] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, parsed: ParsedToolCall, call_id: str | None = None) -> None:
        function = ToolFunction(name=parsed.name, arguments=parsed.arguments, index=len(self.calls))
        self.calls.append(ToolCall(id=call_id, function=function))
        self.strategies.append(parsed.strategy)


Parser = Callable[[str], TextToolCalls | None]
"""Reads one format; None when the text holds no call in that format."""

_LLAMA_TAG = "<|python_tag|>"
_LLAMA_END = re.compile(r"(?:<\|eom_id\|>|<\|eot_id\|>)\s*\Z")
_LLAMA_CALL = re.compile(r"""\A\{\s*["']name["']\s*:""")
_LLAMA_ARGS = re.compile(r"""["'](?:parameters|arguments)["']\s*:""")
_LLAMA_SPLIT = re.compile(r"(?<=\})\s*;\s*(?=\{)")
_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_END = re.compile(r"</s>\s*\Z")
_MISTRAL_SPLIT = re.compile(r"""(?<=\})\s*,\s*(?=\{\s*["']name["'])""")


def _remaining(kept: list[str], found: TextToolCalls) -> TextToolCalls:
    if found.calls:
        found.text = "".join(kept).strip()
    return found


def hermes(text: str) -> TextToolCalls | None:
    """``<tool_call>{...}</tool_call>`` blocks, anywhere in the text."""
    found = TextToolCalls(text)
    kept: list[str] = []
    pos = 0
    while (match := find_tool_call(text, pos)) is not None:
        try:
            parsed = parse_tool_call(match.payload)
        except ToolCallParseError as e:
            found.failures.append(str(e))
            kept.append(text[pos : match.end])
        else:
            kept.append(text[pos : match.start])
            found.add(parsed)
        pos = match.end
    if pos == 0:
        return None
    kept.append(text[pos:])
    return _remaining(kept, found)


def _read_list(body: str, found: TextToolCalls) -> None:
    """A JSON list of calls; when it is broken beyond repair, each element on its own."""
    loaded = load_json(body)
    if loaded is not None and isinstance(loaded[0], list) and loaded[0]:
        items, strategy = loaded
        for item in items:
            try:
                parsed = from_json_object(item, strategy)
            except ToolCallParseError as e:
                found.failures.append(str(e))
            else:
                call_id = item.get("id") if isinstance(item, dict) else None
                found.add(parsed, call_id if isinstance(call_id, str) else None)
        return
    inner = body.strip()[1:]
    inner = inner[:-1] if inner.rstrip().endswith("]") else inner
    for part in _MISTRAL_SPLIT.split(inner.strip()):
        _read_one(part, found)


def _read_one(payload: str, found: TextToolCalls, call_id: str | None = None) -> None:
    try:
        found.add(parse_tool_call(payload), call_id)
    except ToolCallParseError as e:
        found.failures.append(str(e))


def llama3(text: str) -> TextToolCalls | None:
    """A whole message of JSON calls with ``parameters``, maybe after ``<|python_tag|>``."""
    before, tag, rest = text.partition(_LLAMA_TAG)
    if not tag:
        before, rest = "", text
    body = unfence(_LLAMA_END.sub("", rest))
    first = body.lstrip("[ \t\r\n")
    if not (_LLAMA_CALL.match(first) and _LLAMA_ARGS.search(first)):
        return None
    found = TextToolCalls(text)
    if body.startswith("["):
        _read_list(body, found)
    else:
        for part in _LLAMA_SPLIT.split(body):
            _read_one(part, found)
    return _remaining([before], found)


def mistral(text: str) -> TextToolCalls | None:
    """``[TOOL_CALLS]`` followed by a JSON list, or by ``name[ARGS]{...}`` calls."""
    before, tag, rest = text.partition(_MISTRAL_TAG)
    if not tag:
        return None
    found = TextToolCalls(text)
    rest = _MISTRAL_END.sub("", rest)
    if rest.lstrip().startswith("["):
        _read_list(rest.strip(), found)
        return _remaining([before], found)
    for call in rest.split(_MISTRAL_TAG):
        head, args_tag, args = call.partition("[ARGS]")
        name, _, call_id = head.partition("[CALL_ID]")
        if not args_tag or not name.strip():
            found.failures.append("[TOOL_CALLS] without a name and [ARGS]")
            continue
        payload = b'{"name": ' + orjson.dumps(name.strip()) + b', "arguments": '
        _read_one(payload.decode() + args.strip() + "}", found, call_id.strip() or None)
    return _remaining([before], found)


_PARSERS: dict[str, Parser] = {
    "hermes": hermes,
    "qwen": hermes,
    "mistral": mistral,
    "llama3": llama3,
}


def parser_names() -> list[str]:
    """The names `get_parser` knows."""
    return sorted(_PARSERS)


def get_parser(name: str) -> Parser:
    """The parser called ``name``; an unknown name is a `ConfigError` listing the known ones."""
    try:
        return _PARSERS[name]
    except KeyError:
        known = ", ".join(parser_names())
        raise ConfigError(f"unknown tool parser {name!r} (known: {known})") from None


def parse_text_tool_calls(text: str, parser: str | None = None) -> TextToolCalls:
    """Every tool call written as text, read by ``parser`` or by the first format present."""
    parsers = [get_parser(parser)] if parser else list(dict.fromkeys(_PARSERS.values()))
    for parse in parsers:
        found = parse(text)
        if found is not None:
            return found
    return TextToolCalls(text)


def extract_tool_calls(text: str, parser: str | None = None) -> tuple[str, list[ToolCall]]:
    """The text left once tool calls written as text are taken out, and those calls.

    Text with no call comes back unchanged with no calls.
    """
    found = parse_text_tool_calls(text, parser)
    return found.text, found.calls
