"""MiniMax-M3's tool calls: every tag behind the namespace marker ``]<]minimax[>[``, and an
argument's structure written as nested tags::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="create_order">]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<shipping>]<]minimax[>[<city>Singapore]<]minimax[>[</city>]<]minimax[>[</shipping>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

A tag holding tags is an object (a name written twice becomes a list) or, when the tool's
schema says ``array``, a list of its children; a tag holding text is a value, typed by the
schema (``integer``, ``number``, ``boolean``; a ``string`` stays as written, spaces included)
or, without one, read as JSON when it is JSON; an empty tag is what its schema says (``""``,
``[]``, ``{}``). Text mixed with tags, or a tag closed out of order, fails the call.

Sources: vLLM ``minimax_m3_tool_parser.py`` (whose grammar lives in vLLM's Rust parser crate),
its tests and ``tests/parser/engine/test_minimax_m3.py``; SGLang ``function_call/minimax_m3.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracegen.parsing.textcalls import TextToolCalls, Tools, parameter_value

NS = "]<]minimax[>["
_OPEN, _CLOSE = NS + "<tool_call>", NS + "</tool_call>"
_INVOKE, _INVOKE_END = NS + '<invoke name="', NS + "</invoke>"
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class _Malformed(ValueError):
    pass


def _alternatives(schema: Any) -> list[Mapping[str, Any]]:
    """The schema, or the branches of its ``anyOf``/``oneOf``."""
    if not isinstance(schema, Mapping):
        return []
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        return [b for b in branches if isinstance(b, Mapping)]
    return [schema]


def _types(schema: Any) -> set[str]:
    kinds: set[str] = set()
    for branch in _alternatives(schema):
        kind = branch.get("type")
        written = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        kinds.update(k.lower() for k in written if isinstance(k, str))
    return kinds


def _child_schema(schema: Any, tag: str) -> Any:
    arrays = [b for b in _alternatives(schema) if "array" in _types(b)]
    if arrays:
        return arrays[0].get("items")
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and tag in properties:
        return properties[tag]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _leaf(raw: str, schema: Any) -> Any:
    """A value written as text, as the schema types it."""
    kinds = _types(schema)
    if not kinds:
        return parameter_value(raw.strip(), None)
    if "null" in kinds and raw.strip() in ("", "null", "Null", "NULL"):
        return None
    if kinds & {"string", "str"} and not kinds & {"array", "object"}:
        return raw
    for kind, convert in (("integer", int), ("int", int), ("number", float), ("float", float)):
        if kind in kinds:
            try:
                number = convert(raw.strip())
            except ValueError:
                continue
            return int(number) if isinstance(number, float) and number.is_integer() else number
    if kinds & {"boolean", "bool"} and raw.strip().lower() in _BOOLEANS:
        return _BOOLEANS[raw.strip().lower()]
    return raw if kinds & {"string", "str"} else parameter_value(raw.strip(), None)


def _assign(parent: dict[str, Any] | list[Any], tag: str, value: Any) -> None:
    if isinstance(parent, list):
        parent.append(value)
    elif tag not in parent:
        parent[tag] = value
    elif isinstance(parent[tag], list):
        parent[tag].append(value)
    else:
        parent[tag] = [parent[tag], value]


_PENDING = object()
"""An element whose text is empty so far: a container if a tag follows, else a value."""


def _settle(tag: str, schema: Any, raw: str) -> Any:
    """An element that held no tag: a value, or the empty container its schema says."""
    kinds = _types(schema)
    if raw.strip() or "string" in kinds or (kinds and not kinds & {"object", "array"}):
        return _leaf(raw, schema)
    if "array" in kinds:
        return []
    return {} if "object" in kinds else ""


def _arguments(body: str, schema: Any) -> dict[str, Any]:
    """The arguments written as nested tags in ``body``, read with an explicit stack of
    ``[tag, schema, value, text]``."""
    root: dict[str, Any] = {}
    stack: list[list[Any]] = [["", schema, root, ""]]
    for chunk in body.split(NS):
        chunk = chunk.lstrip()
        if not chunk:
            continue
        if not chunk.startswith("<") or ">" not in chunk:
            raise _Malformed(f"text outside a tag: {chunk[:40]!r}")
        tag, _, text = chunk[1:].partition(">")
        top = stack[-1]
        if tag.startswith("/"):
            if text.strip():
                raise _Malformed(f"text outside a tag: {text.strip()[:40]!r}")
            if len(stack) == 1 or top[0] != tag[1:].strip():
                raise _Malformed(f"an unexpected </{tag[1:].strip()[:40]}>")
            stack.pop()
            value = _settle(top[0], top[1], top[3]) if top[2] is _PENDING else top[2]
            _assign(stack[-1][2], top[0], value)
            continue
        if top[2] is _PENDING:  # a tag inside: the element is a container
            if top[3].strip():
                raise _Malformed(f"<{top[0][:40]}> mixes text and tags")
            top[2] = [] if "array" in _types(top[1]) else {}
        elif not isinstance(top[2], dict | list):
            raise _Malformed(f"<{top[0][:40]}> mixes text and tags")
        tag = tag.strip()
        stack.append([tag, _child_schema(top[1], tag), _PENDING, text])
    if len(stack) > 1:
        raise _Malformed(f"<{stack[-1][0][:40]}> never closed")
    return root


def _schema(name: str, tools: Tools) -> Any:
    for tool in tools or ():
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and function.get("name") == name:
            return function.get("parameters")
    return None


def minimax_m3(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``]<]minimax[>[<tool_call>`` blocks of ``<invoke name=…>`` calls (MiniMax-M3)."""
    if _OPEN not in text:
        return None
    found = TextToolCalls(text)
    kept: list[str] = []
    pos, close = 0, -2
    while (at := text.find(_OPEN, pos)) >= 0:
        if close != -1 and close < at:  # once there is no end marker left, never look again
            close = text.find(_CLOSE, at)
        if close < 0:
            found.failures.append("a MiniMax-M3 tool call never closed")
            break
        block, after = text[at + len(_OPEN) : close], close + len(_CLOSE)
        if _INVOKE not in block:
            found.failures.append("a MiniMax-M3 tool call holding no <invoke name=...>")
            kept.append(text[pos:after])
            pos = after
            continue
        kept.append(text[pos:at])
        pos, start = after, 0
        while (call := block.find(_INVOKE, start)) >= 0:
            end = block.find(_INVOKE_END, call)
            if end < 0:
                found.failures.append("a MiniMax-M3 <invoke> never closed")
                break
            name, quoted, body = block[call + len(_INVOKE) : end].partition('">')
            start = end + len(_INVOKE_END)
            if not quoted:
                found.failures.append("a MiniMax-M3 <invoke> without a name")
                continue
            try:
                arguments = _arguments(body, _schema(name, tools))
            except _Malformed as e:
                found.failures.append(f"{name[:80]}: {e}")
                continue
            found.add_arguments(name, arguments)
    kept.append(text[pos:])
    return found.finish("".join(kept))
