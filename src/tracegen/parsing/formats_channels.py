"""Tool-call formats written as typed blocks between special tokens.

- ``kimi_k3`` (Kimi K3, XTML): ``<|open|>tools<|sep|>`` holds ``<|open|>call tool="NAME"
  index="1"<|sep|>`` blocks, each with ``<|open|>argument key="KEY" type="string"<|sep|>value
  <|close|>argument<|sep|>`` arguments and closed by ``<|close|>call<|sep|>``; a ``string``
  argument is kept as written, another type is read as JSON. The reply around it lives in a
  ``response`` channel, whose markers are taken out of the text left.
- ``inkling``: ``<|content_invoke_tool_json|>{"name": …, "args": {…}}<|end_message|>`` blocks
  among ``<|message_model|>``-introduced text blocks, whose markers are taken out of the text
  left.
- ``cohere_command3`` (Command A and on; ``cohere_command4`` is the same): ``<|START_ACTION|>``
  then a JSON list of ``{"tool_call_id", "tool_name", "parameters"}`` then ``<|END_ACTION|>``.
- ``solar_open2``: ``<|tool_call:start|>NAME`` and a line break, then ``<|tool_arg:start|>KEY
  <|tool_arg:value|>value<|tool_arg:end|>`` arguments, then ``<|tool_call:end|>``.
- ``muse_glimmer``: ``<atem:invoke name=…>`` calls inside a ``<|start|>assistant to=TOOL
  <|message|>`` message; the same markup in the reasoning (``to=self``) or the answer
  (``to=user``) is not a call.

Sources: vLLM ``kimi_k3_tool_parser.py``; vLLM ``vllm/parser/inkling.py`` (the parser engine
behind ``inkling_tool_parser.py``); ``cohere_command_tool_parser.py`` (which delegates to the
``cohere_melody`` package) and its tests; ``solar_open2_tool_parser.py``;
``muse_glimmer_tool_parser.py``.
"""

from __future__ import annotations

import bisect
import html
import re
from typing import Any

import orjson

from tracegen.parsing.formats_markup import invoke_format
from tracegen.parsing.textcalls import (
    TextToolCalls,
    Tools,
    balanced_end,
    enclosed,
    parameter_types,
    parameter_value,
)
from tracegen.parsing.toolcall import load_json

# ------------------------------------------------------------------ kimi_k3

_K3_TOOLS = re.compile(
    r"<\|open\|>\s*tools\s*<\|sep\|>(.*?)(?:<\|close\|>\s*tools\s*<\|sep\|>|\Z)", re.DOTALL
)
_K3_CALL = re.compile(
    r"<\|open\|>\s*call\s+([^<]*?)<\|sep\|>(.*?)(<\|close\|>\s*call\s*<\|sep\|>|\Z)", re.DOTALL
)
_K3_ARGUMENT = re.compile(
    r"<\|open\|>\s*argument\s+([^<]*?)<\|sep\|>(.*?)(<\|close\|>\s*argument\s*<\|sep\|>|\Z)",
    re.DOTALL,
)
_K3_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_K3_RESPONSE_MARKS = re.compile(r"<\|(?:open|close)\|>\s*(?:response|message)\s*<\|sep\|>")


def _attributes(raw: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in _K3_ATTRIBUTE.findall(raw)}


def kimi_k3(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|open|>call tool="NAME"<|sep|>`` blocks in Kimi K3's ``tools`` channel."""
    section = _K3_TOOLS.search(text)
    if section is None:
        return None
    found = TextToolCalls(text)
    for call in _K3_CALL.finditer(section.group(1)):
        name = _attributes(call.group(1)).get("tool", "")
        if not call.group(3) or not name:
            found.failures.append(
                f"a Kimi K3 call {'never closed' if name else 'without a tool name'}"
            )
            continue
        arguments: dict[str, Any] = {}
        for argument in _K3_ARGUMENT.finditer(call.group(2)):
            attributes = _attributes(argument.group(1))
            kind = attributes.get("type", "string")
            arguments[attributes.get("key", "")] = parameter_value(
                argument.group(2), "string" if kind == "string" else None
            )
        found.add_arguments(name, arguments)
    kept = text[: section.start()] + text[section.end() :]
    return found.finish(_K3_RESPONSE_MARKS.sub("", kept))


# ------------------------------------------------------------------ inkling

_INKLING_CALL = "<|content_invoke_tool_json|>"
_INKLING_ENDS = re.compile(r"<\|end_message\|>|<\|content_model_end_sampling\|>")
_INKLING_MARKS = re.compile(
    r"<\|(?:message_model|content_text|end_message|content_model_end_sampling)\|>"
)


def _inkling_call(body: str, found: TextToolCalls) -> bool:
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        found.failures.append("an Inkling tool call that is not a JSON object")
        return False
    name = call.get("name") if isinstance(call, dict) else None
    arguments = call.get("args", {}) if isinstance(call, dict) else None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        found.failures.append('an Inkling tool call without a "name" and an "args" object')
        return False
    found.add_arguments(name, arguments)
    return True


def inkling(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|content_invoke_tool_json|>{"name": …, "args": {…}}<|end_message|>`` blocks."""
    if _INKLING_CALL not in text:
        return None
    found = TextToolCalls(text)
    kept: list[str] = []
    pos = 0
    while (at := text.find(_INKLING_CALL, pos)) >= 0:
        body = at + len(_INKLING_CALL)
        end = _INKLING_ENDS.search(text, body)
        stop, after = (end.start(), end.end()) if end else (len(text), len(text))
        brace = text.find("{", body, stop)
        if end is None and brace >= 0 and not text[body:brace].strip():
            # no end marker (generation stopped): the object alone, where its brackets close
            stop = after = balanced_end(text, brace) or len(text)
        read = _inkling_call(text[body:stop], found)
        kept.append(text[pos : at if read else after])
        pos = after
    kept.append(text[pos:])
    return found.finish(_INKLING_MARKS.sub("", "".join(kept)))


# ------------------------------------------------------------------ cohere_command3

_COHERE_ACTION = enclosed("<|START_ACTION|>", "<|END_ACTION|>")


def cohere_command(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|START_ACTION|>[{"tool_call_id": …, "tool_name": …, "parameters": {…}}]
    <|END_ACTION|>`` (Command A and its successors)."""
    if "<|START_ACTION|>" not in text:
        return None
    found = TextToolCalls(text)
    kept, pos = [], 0
    for action in _COHERE_ACTION.finditer(text):
        loaded = load_json(action.group(1).strip()) if action.group(2) else None
        items = loaded[0] if loaded else None
        items = [items] if isinstance(items, dict) else items
        if not isinstance(items, list) or not items:
            found.failures.append("a Command action that is not a closed JSON list of calls")
            continue
        kept.append(text[pos : action.start()])
        pos = action.end()
        for item in items:
            name = item.get("tool_name") if isinstance(item, dict) else None
            arguments = item.get("parameters", {}) if isinstance(item, dict) else None
            if not isinstance(name, str) or not isinstance(arguments, dict):
                found.failures.append('a Command call without a "tool_name" and "parameters"')
                continue
            call_id = item.get("tool_call_id")
            found.add_arguments(name, arguments, call_id if isinstance(call_id, str) else None)
    kept.append(text[pos:])
    return found.finish("".join(kept))


# ------------------------------------------------------------------ solar_open2

_SOLAR_CALL, _SOLAR_CALL_END = "<|tool_call:start|>", "<|tool_call:end|>"
_SOLAR_ARG, _SOLAR_VALUE, _SOLAR_ARG_END = (
    "<|tool_arg:start|>",
    "<|tool_arg:value|>",
    "<|tool_arg:end|>",
)


def solar_open2(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|tool_call:start|>NAME`` and a line break, then ``<|tool_arg:start|>KEY
    <|tool_arg:value|>value<|tool_arg:end|>`` arguments, then ``<|tool_call:end|>`` (Solar Open
    2). A value is text unless the tool's schema types it; a dropped end marker ends the call
    (or argument) at the next call (or argument); a call cut off at the end is not read."""
    if _SOLAR_CALL not in text:
        return None
    types = parameter_types(tools)
    found = TextToolCalls(text)
    kept: list[str] = []
    pos, close = 0, -2
    while (at := text.find(_SOLAR_CALL, pos)) >= 0:
        body = at + len(_SOLAR_CALL)
        if close != -1 and close < body:  # once there is no end marker left, never look again
            close = text.find(_SOLAR_CALL_END, body)
        following = text.find(_SOLAR_CALL, body)
        if close < 0 or 0 <= following < close:
            end, after = (following, following) if following >= 0 else (len(text), len(text))
        else:
            end, after = close, close + len(_SOLAR_CALL_END)
        head, newline, rest = text[body:end].partition("\n")
        if after == len(text) and close < 0:
            found.failures.append(f"{head.strip()[:80]!r}: a Solar call cut off at the end")
            break
        if not newline:
            found.failures.append("a Solar call whose name line never ends")
            pos = after
            continue
        name, arguments = head.strip(), {}
        kinds = types.get(head.strip(), {})
        for part in rest.split(_SOLAR_ARG)[1:]:
            key, marked, value = part.partition(_SOLAR_VALUE)
            if marked and key not in arguments:
                value = value.split(_SOLAR_ARG_END, 1)[0]
                arguments[key] = parameter_value(value, kinds.get(key) or "string")
        kept.append(text[pos:at])
        pos = after
        found.add_arguments(name, arguments)
    kept.append(text[pos:])
    return found.finish("".join(kept))


# ------------------------------------------------------------------ muse_glimmer

_MUSE_MESSAGE = "<|message|>"
_MUSE_END = re.compile(r"<\|eom\|>|<\|eot\|>")
_MUSE_RECIPIENT = re.compile(r"to=([A-Za-z0-9_.\-]+)\Z")
_MUSE_TURN = re.compile(r"(?:<\|start\|>\s*assistant)?[^\S\n]*\Z")
_MUSE_NOT_TOOLS = (None, "self", "user")
_LOOK_BACK = 160


def _muse_headers(text: str) -> list[tuple[int, int, str | None]]:
    """Each ``[<|start|>assistant] [to=NAME]<|message|>`` header: where it starts, where its
    message begins, and the recipient. Found from each ``<|message|>`` looking back a bounded
    window, so text full of spaces is read in linear time."""
    headers = []
    at = text.find(_MUSE_MESSAGE)
    while at >= 0:
        start = at
        window = text[max(0, start - _LOOK_BACK) : start]
        named = _MUSE_RECIPIENT.search(window)
        if named is not None:
            start -= len(window) - named.start()
        window = text[max(0, start - _LOOK_BACK) : start]
        turn = _MUSE_TURN.search(window)
        start -= len(window) - turn.start() if turn else 0
        headers.append((start, at + len(_MUSE_MESSAGE), named.group(1) if named else None))
        at = text.find(_MUSE_MESSAGE, at + len(_MUSE_MESSAGE))
    return headers


def _muse_messages(text: str) -> list[tuple[str | None, str]]:
    """Each assistant message's recipient and body; a message ends at ``<|eom|>``,
    ``<|eot|>`` or the next header."""
    headers = _muse_headers(text)
    ends = [m.start() for m in _MUSE_END.finditer(text)]
    messages: list[tuple[str | None, str]] = []
    for i, (_, begin, to) in enumerate(headers):
        end = bisect.bisect_left(ends, begin)
        stop = ends[end] if end < len(ends) else len(text)
        if i + 1 < len(headers):
            stop = min(stop, headers[i + 1][0])
        messages.append((to, text[begin:stop]))
    return messages


_atem = invoke_format(
    r"<atem:function_calls>(.*?)(?:</atem:function_calls>|\Z)", "atem:", strip=False
)


def muse_glimmer(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<atem:invoke name=…>`` calls in a message addressed ``to=`` a tool (MuseGlimmer); one
    in the reasoning (``to=self``) or the answer (``to=user``) is not a call. The text left is
    the answer's."""
    if "<atem:invoke" not in text:
        return None
    messages = _muse_messages(text)
    if not messages:
        return _atem(text, tools)
    calls = "\n".join(body for to, body in messages if to not in _MUSE_NOT_TOOLS)
    found = _atem(calls, tools) if "<atem:invoke" in calls else None
    if found is None:
        return None
    if not found.calls:
        found.text = text
        return found
    return found.finish("".join(body for to, body in messages if to in (None, "user")))
