"""Tool-call formats of Google's Gemma family: a call is ``call:NAME{key:value,…}`` between
special tokens, strings between quote tokens, other values bare.

- ``gemma4`` (Gemma 4): ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:42,o:{…},l:[…]}
  <tool_call|>`` (some checkpoints end the call with ``<turn|>``); a quoted value stays text,
  a bare one is a number, ``true``, ``false`` or ``null`` (else text), objects and lists nest.
- ``functiongemma`` (FunctionGemma): ``<start_function_call>call:NAME{key:<escape>value
  <escape>,…}<end_function_call>``; a quoted value is read as JSON when it is JSON.

Sources: vLLM ``gemma4_tool_parser.py`` and ``gemma4_utils.py`` (``_parse_gemma4_args``),
``functiongemma_tool_parser.py``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from tracegen.parsing.textcalls import Parser, TextToolCalls, Tools, enclosed

_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_BARE = {"true": True, "false": False, "null": None}


class _Malformed(ValueError):
    pass


def _bare(word: str) -> Any:
    """A value written without quotes: a number, ``true``, ``false``, ``null``, else text."""
    if word in _BARE:
        return _BARE[word]
    if _NUMBER.fullmatch(word):
        return int(word) if word.lstrip("-").isdigit() else float(word)
    return word


def _quoted(raw: str, json_strings: bool) -> Any:
    if not json_strings:
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw


def read_arguments(body: str, quote: str, *, json_strings: bool = False) -> dict[str, Any]:
    """The ``key:value,…`` arguments of a call (``body`` without its outer braces), read in one
    pass with an explicit stack (deep nesting costs no recursion). A bracket or quote left open,
    or a closing bracket of the wrong kind, raises `_Malformed`; a key without a value is
    ``""``."""
    root: dict[str, Any] = {}
    stack: list[tuple[dict[str, Any] | list[Any], str | None]] = [(root, None)]
    keys: list[str | None] = [None]
    i, n = 0, len(body)

    def attach(value: Any) -> None:
        top = stack[-1][0]
        if isinstance(top, list):
            top.append(value)
        else:
            top[keys[-1] or ""] = value
            keys[-1] = None

    def close(closer: str) -> None:
        if len(stack) == 1 or stack[-1][1] != closer:
            raise _Malformed(f"an unexpected {closer!r}")
        value, _ = stack.pop()
        keys.pop()
        attach(value)

    while i < n:
        c = body[i]
        if c in " \t\r\n,":
            i += 1
            continue
        top = stack[-1][0]
        if isinstance(top, dict) and keys[-1] is None:  # a key, or the end of the object
            if c in "}]":
                close(c)
                i += 1
                continue
            if body.startswith(quote, i):
                end = body.find(quote, i + len(quote))
                if end < 0:
                    raise _Malformed("a key whose quote never closes")
                key, i = body[i + len(quote) : end], end + len(quote)
                if not body.startswith(":", i):
                    raise _Malformed(f"{key[:40]!r} without ':'")
            else:
                colon = body.find(":", i)
                if colon < 0:
                    raise _Malformed("a key without ':'")
                key, i = body[i:colon].strip(), colon
                if not key or any(ch in key for ch in "{}[],"):
                    raise _Malformed(f"{key[:40]!r} is not a key")
            keys[-1] = key
            i += 1
            continue
        if c in "}]":
            close(c)
            i += 1
        elif c == "{":
            stack.append(({}, "}"))
            keys.append(None)
            i += 1
        elif c == "[":
            stack.append(([], "]"))
            keys.append(None)
            i += 1
        elif body.startswith(quote, i):
            end = body.find(quote, i + len(quote))
            if end < 0:
                raise _Malformed("a string whose quote never closes")
            attach(_quoted(body[i + len(quote) : end], json_strings))
            i = end + len(quote)
        else:
            start = i
            while i < n and body[i] not in ",}]":
                i += 1
            attach(_bare(body[start:i].strip()))
    if len(stack) > 1:
        raise _Malformed(f"a {'{' if stack[-1][1] == '}' else '['} never closed")
    if keys[-1] is not None:
        attach("")
    return root


def gemma_calls(
    opening: str, closings: tuple[str, ...], quote: str, *, json_strings: bool
) -> Parser:
    """A parser for ``opening``\\ ``call:NAME{…}``\\ closing calls."""
    block = enclosed(opening, *closings)

    def parse(text: str, tools: Tools = None) -> TextToolCalls | None:
        if opening not in text:
            return None
        found = TextToolCalls(text)
        kept, pos = [], 0
        for m in block.finditer(text):
            body = m.group(1).strip()
            name, brace, rest = body.removeprefix("call:").partition("{")
            if (
                not m.group(2)
                or not body.startswith("call:")
                or not brace
                or not rest.endswith("}")
            ):
                found.failures.append(f"a call in {opening} that is not closed call:NAME{{…}}")
                continue
            try:
                arguments = read_arguments(rest[:-1], quote, json_strings=json_strings)
            except _Malformed as e:
                found.failures.append(f"{name.strip()[:80]}: {e}")
                continue
            kept.append(text[pos : m.start()])
            pos = m.end()
            found.add_arguments(name.strip(), arguments)
        kept.append(text[pos:])
        return found.finish("".join(kept))

    return parse


gemma4 = gemma_calls("<|tool_call>", ("<tool_call|>", "<turn|>"), '<|"|>', json_strings=False)
"""``<|tool_call>call:NAME{key:<|"|>value<|"|>}<tool_call|>`` (Gemma 4)."""

functiongemma = gemma_calls(
    "<start_function_call>", ("<end_function_call>",), "<escape>", json_strings=True
)
"""``<start_function_call>call:NAME{key:<escape>value<escape>}<end_function_call>``."""
