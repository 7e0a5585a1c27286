"""Tool-call formats that write each argument in its own markup element.

- ``qwen3_coder`` (Qwen3-Coder, Qwen3.5): ``<tool_call><function=name><parameter=key>value
  </parameter></function></tool_call>``; a ``<function=…>`` without the ``<tool_call>`` around it
  is read too.
- ``glm45`` (GLM-4.5, 4.6, 4.7): ``<tool_call>name<arg_key>key</arg_key><arg_value>value
  </arg_value></tool_call>``.
- ``minimax_m2``: ``<minimax:tool_call><invoke name="name"><parameter name="key">value
  </parameter></invoke></minimax:tool_call>``.

A value is typed by the tool's schema when the request's ``tools`` is given (a ``string``
parameter stays as written), else read as JSON when it is JSON (`parameter_value`). Sources:
vLLM ``qwen3coder_tool_parser.py``, ``glm4_moe_tool_parser.py``, ``minimax_m2_tool_parser.py``.
"""

from __future__ import annotations

import re
from typing import Any

from tracegen.parsing.textcalls import TextToolCalls, Tools, parameter_types, parameter_value


def _trim_newline(value: str) -> str:
    """The value without the one line break the format puts on each side."""
    value = value.removeprefix("\r\n").removeprefix("\n")
    return value.removesuffix("\n").removesuffix("\r")


def _add_call(name: str, pairs: list[tuple[str, str]], tools: Tools, found: TextToolCalls) -> None:
    """The call ``name`` with its ``(key, value as written)`` parameters, typed by ``tools``,
    added to ``found``; a parameter without a name fails the call."""
    types = parameter_types(tools).get(name, {})
    arguments: dict[str, Any] = {}
    for key, raw in pairs:
        key = key.strip()
        if not key:
            found.failures.append(f"{name}: a parameter without a name")
            return
        arguments[key] = parameter_value(raw, types.get(key))
    found.add_arguments(name, arguments)


# ------------------------------------------------------------------ qwen3_coder

_QWEN_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_QWEN_FUNCTION = re.compile(r"<function=(.*?)(?:</function>|(?=<function=)|\Z)", re.DOTALL)
_QWEN_PARAMETER = re.compile(
    r"<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)


def qwen3_coder(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<function=name>`` calls with ``<parameter=key>`` values, in ``<tool_call>`` or bare."""
    if "<function=" not in text:
        return None
    blocks = [b for b in _QWEN_BLOCK.finditer(text) if "<function=" in b.group(1)]
    spans = [(b.start(), b.end(), b.group(1)) for b in blocks] or [
        (f.start(), f.end(), f.group(0)) for f in _QWEN_FUNCTION.finditer(text)
    ]
    found = TextToolCalls(text)
    kept, pos = [], 0
    for start, end, body in spans:
        kept.append(text[pos:start])
        pos = end
        for function in _QWEN_FUNCTION.finditer(body):
            head, closed, rest = function.group(1).partition(">")
            name = head.strip()
            if not closed or not name:
                found.failures.append("<function= without a name closed by >")
                continue
            pairs = []
            for parameter in _QWEN_PARAMETER.finditer(rest):
                key, _, value = parameter.group(1).partition(">")
                pairs.append((key, _trim_newline(value)))
            _add_call(name, pairs, tools, found)
    kept.append(text[pos:])
    return found.finish("".join(kept))


# ------------------------------------------------------------------ glm45

_GLM_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_GLM_PAIR = re.compile(
    r"<arg_key>([^<]*)</arg_key>\s*<arg_value>(.*?)(?:</arg_value>|\Z)", re.DOTALL
)


def glm45(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<tool_call>name`` then ``<arg_key>``/``<arg_value>`` pairs (GLM-4.5 on)."""
    blocks = [
        b for b in _GLM_BLOCK.finditer(text) if not b.group(1).lstrip().startswith(("{", "["))
    ]
    if not blocks:
        return None
    found = TextToolCalls(text)
    kept, pos = [], 0
    for block in blocks:
        body = block.group(1)
        name = body.split("<arg_key>", 1)[0].strip()
        if not block.group(2) or not name or "<" in name or "\n" in name:
            reason = "without its </tool_call>" if not block.group(2) else "without a name"
            found.failures.append(f"a glm45 <tool_call> {reason}")
            kept.append(text[pos : block.end()])
            pos = block.end()
            continue
        kept.append(text[pos : block.start()])
        pos = block.end()
        pairs = [(m.group(1), m.group(2)) for m in _GLM_PAIR.finditer(body)]
        if len(pairs) != body.count("<arg_key>"):
            found.failures.append(f"{name}: an <arg_key> without its </arg_key> and <arg_value>")
            continue
        _add_call(name, pairs, tools, found)
    kept.append(text[pos:])
    return found.finish("".join(kept))


# ------------------------------------------------------------------ minimax_m2

_M2_BLOCK = re.compile(r"<minimax:tool_call>(.*?)(?:</minimax:tool_call>|\Z)", re.DOTALL)
_M2_INVOKE = re.compile(
    r"<invoke\s+name=[\"']?([^\"'>]+)[\"']?\s*>(.*?)(?:</invoke>|\Z)", re.DOTALL
)
_M2_PARAMETER = re.compile(
    r"<parameter\s+name=[\"']?([^\"'>]+)[\"']?\s*>(.*?)(?:</parameter>|\Z)", re.DOTALL
)


def minimax_m2(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<invoke name=…>`` calls with ``<parameter name=…>`` values (MiniMax-M2)."""
    blocks = list(_M2_BLOCK.finditer(text))
    if not blocks:
        return None
    found = TextToolCalls(text)
    kept, pos = [], 0
    for block in blocks:
        kept.append(text[pos : block.start()])
        pos = block.end()
        invokes = list(_M2_INVOKE.finditer(block.group(1)))
        if not invokes:
            found.failures.append("<minimax:tool_call> holds no <invoke name=...>")
        for invoke in invokes:
            name = invoke.group(1).strip()
            pairs = [
                (m.group(1), _trim_newline(m.group(2).strip(" \t")))
                for m in _M2_PARAMETER.finditer(invoke.group(2))
            ]
            _add_call(name, pairs, tools, found)
    kept.append(text[pos:])
    return found.finish("".join(kept))
