"""Tool calls written as a Python list of calls: ``[get_weather(city="Paris", days=2), …]``.

- ``pythonic`` (Llama 3.2 with vLLM's pythonic template, ToolACE, Granite): the list ends the
  message (prose may come before it).
- ``llama4_pythonic``: the same, maybe between ``<|python_start|>`` and ``<|python_end|>``.

Arguments are keywords whose values are Python literals (strings, numbers, ``True``/``None``,
lists, dicts); read with `ast`, never evaluated. Source: vLLM ``pythonic_tool_parser.py`` and
``llama4_pythonic_tool_parser.py``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from tracegen.parsing.textcalls import TextToolCalls, Tools
from tracegen.schema import json_value

_PY_START = "<|python_start|>"
_PY_END = "<|python_end|>"
_OPENING = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


class _NotACall(ValueError):
    pass


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    raise _NotACall("a call whose function is not a name")


def _read(source: str) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls in ``source``; None when it is not a list of calls at all."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    body = tree.body
    if not isinstance(body, ast.List | ast.Tuple) or not body.elts:
        return None
    if not all(isinstance(e, ast.Call) for e in body.elts):
        return None
    calls = []
    for call in body.elts:
        assert isinstance(call, ast.Call)
        name = _name(call.func)
        if call.args:
            raise _NotACall(f"{name}: positional arguments (only keyword=value is a call)")
        arguments: dict[str, Any] = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                raise _NotACall(f"{name}: **arguments")
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise _NotACall(f"{name}: {keyword.arg} is not a literal value") from None
        try:
            json_value(arguments)
        except ValueError as e:
            raise _NotACall(f"{name}: the arguments hold {e}") from None
        calls.append((name, arguments))
    return calls


def pythonic(text: str, tools: Tools = None) -> TextToolCalls | None:
    """A Python list of keyword calls ending the message."""
    body = text.rstrip()
    for opening in _OPENING.finditer(body):
        if opening.start() > 0 and body[opening.start() - 1] not in " \t\r\n:>":
            continue
        found = TextToolCalls(text)
        try:
            calls = _read(body[opening.start() :])
        except (_NotACall, RecursionError) as e:
            found.failures.append(str(e))
            return found
        if calls is None:
            continue
        for name, arguments in calls:
            found.add_arguments(name, arguments)
        return found.finish(body[: opening.start()])
    return None


def llama4_pythonic(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``pythonic``, maybe between ``<|python_start|>`` and ``<|python_end|>``."""
    before, tag, rest = text.partition(_PY_START)
    if not tag:
        return pythonic(text.replace(_PY_END, ""), tools)
    inner, _, after = rest.partition(_PY_END)
    found = pythonic(inner, tools)
    if found is None:
        return None
    prose = found.text if found.calls else ""
    found.text = text
    return found.finish(before + prose + after)
