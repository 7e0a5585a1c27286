"""Tool-call formats written as typed blocks between special tokens.

- ``kimi_k3`` (Kimi K3, XTML): ``<|open|>tools<|sep|>`` holds ``<|open|>call tool="NAME"
  index="1"<|sep|>`` blocks, each with ``<|open|>argument key="KEY" type="string"<|sep|>value
  <|close|>argument<|sep|>`` arguments and closed by ``<|close|>call<|sep|>``; a ``string``
  argument is kept as written, another type is read as JSON. The reply around it lives in a
  ``response`` channel, whose markers are taken out of the text left.
- ``inkling``: ``<|content_invoke_tool_json|>{"name": …, "args": {…}}<|end_message|>`` blocks
  among ``<|message_model|>``-introduced text blocks, whose markers are taken out of the text
  left.

Sources: vLLM ``kimi_k3_tool_parser.py``; vLLM ``vllm/parser/inkling.py`` (the parser engine
behind ``inkling_tool_parser.py``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import orjson

from tracegen.parsing.textcalls import TextToolCalls, Tools, parameter_value

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
                f"a Kimi K3 call {'without a tool name' if name else 'never closed'}"
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
        after = end.end() if end else len(text)
        read = _inkling_call(text[body : end.start() if end else len(text)], found)
        kept.append(text[pos : at if read else after])
        pos = after
    kept.append(text[pos:])
    return found.finish(_INKLING_MARKS.sub("", "".join(kept)))
