"""Tool calls written as a Python list of calls: ``[get_weather(city="Paris", days=2), …]``.

- ``pythonic`` (Llama 3.2 with vLLM's pythonic template, ToolACE): lists of calls anywhere in
  the text (as SGLang reads them); a list that cannot be read is reported when it ends the
  message, and left as prose elsewhere.
- ``llama4_pythonic``: the same, maybe between ``<|python_start|>`` and ``<|python_end|>``.
- ``lfm2`` (LFM2, LFM2.5): a list of calls between ``<|tool_call_start|>`` and
  ``<|tool_call_end|>``.
- ``olmo3`` (Olmo 3): one call a line, no list, between ``<function_calls>`` and
  ``</function_calls>``; JSON's ``true``, ``false`` and ``null`` are read as Python's.

Arguments are keywords whose values are Python literals (strings, numbers, ``True``/``None``,
lists, dicts); read with `ast`, never evaluated. Source: vLLM ``pythonic_tool_parser.py`` and
``llama4_pythonic_tool_parser.py``, ``lfm2_tool_parser.py``, ``olmo3_tool_parser.py``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from tracegen.parsing.textcalls import Closings, TextToolCalls, Tools, enclosed
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
    return [_call(call) for call in body.elts if isinstance(call, ast.Call)]


_JSON_LITERALS = {"true": True, "false": False, "null": None}


class _JsonLiterals(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in _JSON_LITERALS:
            return ast.copy_location(ast.Constant(_JSON_LITERALS[node.id]), node)
        return node


def _call(call: ast.Call, json_literals: bool = False) -> tuple[str, dict[str, Any]]:
    """One keyword call's name and arguments; `_NotACall` when it cannot be read."""
    name = _name(call.func)
    if call.args:
        raise _NotACall(f"{name}: positional arguments (only keyword=value is a call)")
    arguments: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise _NotACall(f"{name}: **arguments")
        value = _JsonLiterals().visit(keyword.value) if json_literals else keyword.value
        try:
            arguments[keyword.arg] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise _NotACall(f"{name}: {keyword.arg} is not a literal value") from None
    try:
        json_value(arguments)
    except ValueError as e:
        raise _NotACall(f"{name}: the arguments hold {e}") from None
    return name, arguments


def pythonic(text: str, tools: Tools = None) -> TextToolCalls | None:
    """Python lists of keyword calls, wherever they stand in the text."""
    found = TextToolCalls(text)
    closings = Closings(text, python=True)
    kept, pos = [], 0
    for opening in _OPENING.finditer(text):
        start = opening.start()
        if start < pos or (start > 0 and text[start - 1] not in " \t\r\n:>"):
            continue
        read = _list_at(text, start, closings)
        if read is None:
            continue
        end, calls = read
        if isinstance(calls, str):
            if not text[end:].strip():  # a list ending the message was meant as the calls
                found.failures.append(calls)
            pos = end  # a list inside a call that cannot be read is one of its arguments
            continue
        kept.append(text[pos:start])
        pos = end
        for name, arguments in calls:
            found.add_arguments(name, arguments)
    if not found.calls and not found.failures:
        return None
    kept.append(text[pos:])
    return found.finish("".join(kept))


def _list_at(
    text: str, start: int, closings: Closings
) -> tuple[int, list[tuple[str, dict[str, Any]]] | str] | None:
    """The list of calls opening at ``start`` and where it ends; a reason instead of the calls
    when it is a list of calls that cannot be read; None when no list of calls opens there."""
    end = closings.at(start)
    if end is None:
        return None
    try:
        calls = _read(text[start:end])
    except (_NotACall, RecursionError) as e:
        return end, str(e)
    return None if calls is None else (end, calls)


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


_OLMO = enclosed("<function_calls>", "</function_calls>")


def olmo3(text: str, tools: Tools = None) -> TextToolCalls | None:
    """Keyword calls, one a line, between ``<function_calls>`` and ``</function_calls>``."""
    block = _OLMO.search(text)
    if block is None:
        return None
    found = TextToolCalls(text)
    try:
        tree = ast.parse(block.group(1).strip(), mode="exec")
        statements = tree.body
        if not statements:
            raise _NotACall("<function_calls> holds no call")
        calls = []
        for statement in statements:
            if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
                raise _NotACall("<function_calls> holds something other than calls")
            calls.append(_call(statement.value, json_literals=True))
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        reason = str(e) if isinstance(e, _NotACall) else "<function_calls> is not Python calls"
        found.failures.append(reason)
        return found
    for name, arguments in calls:
        found.add_arguments(name, arguments)
    return found.finish(text[: block.start()] + text[block.end() :])


_LFM2 = enclosed("<|tool_call_start|>", "<|tool_call_end|>")


def lfm2(text: str, tools: Tools = None) -> TextToolCalls | None:
    """Lists of keyword calls between ``<|tool_call_start|>`` and ``<|tool_call_end|>``."""
    blocks = list(_LFM2.finditer(text))
    if not blocks:
        return None
    found = TextToolCalls(text)
    kept, pos = [], 0
    for block in blocks:
        body = block.group(1).strip()
        if body.replace(" ", "") == "[]":  # no call
            kept.append(text[pos : block.start()])
            pos = block.end()
            continue
        try:
            calls = _read(body)
        except (_NotACall, RecursionError) as e:
            found.failures.append(str(e))
            continue
        if calls is None:
            found.failures.append("<|tool_call_start|> not followed by a list of calls")
            continue
        kept.append(text[pos : block.start()])
        pos = block.end()
        for name, arguments in calls:
            found.add_arguments(name, arguments)
    kept.append(text[pos:])
    return found.finish("".join(kept))
