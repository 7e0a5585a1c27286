"""Tool-call formats that write each argument in its own markup element.

- ``qwen3_coder`` (Qwen3-Coder, Qwen3.5): ``<tool_call><function=name><parameter=key>value
  </parameter></function></tool_call>``; a ``<function=…>`` without the ``<tool_call>`` around it
  is read too.
- ``glm45`` (GLM-4.5, 4.6, 4.7): ``<tool_call>name<arg_key>key</arg_key><arg_value>value
  </arg_value></tool_call>``.
- ``seed_oss`` (Seed-OSS): the ``qwen3_coder`` layout inside ``<seed:tool_call>``; a call written
  inside the ``<seed:think>`` reasoning is not a call.
- ``minimax_m2``: ``<minimax:tool_call><invoke name="name"><parameter name="key">value
  </parameter></invoke></minimax:tool_call>``. The same ``invoke``/``parameter`` layout, under
  a namespace: ``step3`` (``<steptml:invoke …>`` between ``<｜tool_calls_begin｜>`` and
  ``<｜tool_calls_end｜>``), ``step_deepresearch`` (inside ``<steptml:toolcall>``) and
  ``deepseek_v32`` (DeepSeek-V3.2's DSML: ``<｜DSML｜invoke …>`` inside
  ``<｜DSML｜function_calls>``, a parameter marked ``string="true"`` kept as text), ``deepseek_v4``
  (the same inside ``<｜DSML｜tool_calls>``), ``gigachat35`` (``<｜GCML｜invoke …>`` inside
  ``<｜GCML｜tool_calls>``) and, renamed, ``minicpm5`` (``<function name="f">
  <param name="k">v</param></function>``, a value maybe in ``<![CDATA[…]]>``).
- ``hy_v3`` (Hy3): the ``glm45`` layout with ``<tool_sep>`` after the name, inside
  ``<tool_calls>``; Hy4's (``hy_v4``) has no ``<tool_sep>`` and may suffix every tag.
- ``k2_horizon``: the ``glm45`` layout under ``ifm|`` (``<ifm|tool_call>``, ``<ifm|arg_key>``,
  an optional ``<ifm|arg_type>``), or a JSON call, inside ``<ifm|tool_calls>``.
- ``dots``: ``<dots_function_call>`` blocks holding ``minimax_m2``'s ``<invoke>`` calls or one
  JSON call.

A value is typed by the tool's schema when the request's ``tools`` is given (a ``string``
parameter stays as written), else read as JSON when it is JSON (`parameter_value`). Sources:
vLLM ``qwen3coder_tool_parser.py``, ``seed_oss_tool_parser.py``, ``glm4_moe_tool_parser.py``,
``minimax_m2_tool_parser.py``, ``step3_tool_parser.py``, ``step_deepresearch_tool_parser.py``,
``deepseekv32_tool_parser.py``, ``deepseekv4_tool_parser.py``, ``minicpm5xml_tool_parser.py``,
``hy_v3_tool_parser.py``, ``hy_v4_tool_parser.py``, ``dots_tool_parser.py``,
``gigachat35_tool_parser.py``, ``k2_horizon_tool_parser.py``.
"""

from __future__ import annotations

import re
from typing import Any

from tracegen.parsing.formats_json import deepseek, minimax, read_call_list, tagged_json
from tracegen.parsing.textcalls import (
    Parser,
    TextToolCalls,
    Tools,
    enclosed,
    parameter_types,
    parameter_value,
)
from tracegen.parsing.toolcall import ParsedToolCall


def _trim_newline(value: str) -> str:
    """The value without the one line break the format puts on each side."""
    value = value.removeprefix("\r\n").removeprefix("\n")
    return value.removesuffix("\n").removesuffix("\r")


def _add_call(
    name: str,
    pairs: list[tuple[str, str]],
    tools: Tools,
    found: TextToolCalls,
    kinds: dict[str, str] | None = None,
) -> None:
    """The call ``name`` with its ``(key, value as written)`` parameters, typed by ``tools``
    (else by the ``kinds`` the format wrote beside them), added to ``found``; a parameter
    without a name fails the call."""
    types = parameter_types(tools).get(name, {})
    arguments: dict[str, Any] = {}
    for key, raw in pairs:
        key = key.strip()
        if not key:
            found.failures.append(f"{name}: a parameter without a name")
            return
        arguments[key] = parameter_value(raw, types.get(key) or (kinds or {}).get(key))
    found.add_arguments(name, arguments)


# ------------------------------------------------------------------ qwen3_coder

_QWEN_BLOCK = enclosed("<tool_call>", "</tool_call>")
_QWEN_FUNCTION = re.compile(r"<function=(.*?)(?:</function>|(?=<function=)|\Z)", re.DOTALL)
_QWEN_PARAMETER = re.compile(
    r"<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)


def qwen3_coder(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<function=name>`` calls with ``<parameter=key>`` values, in ``<tool_call>`` or bare."""
    if "<function=" not in text:
        return None
    return _functions(text, _QWEN_BLOCK, 0, tools)


_SEED_BLOCK = enclosed("<seed:tool_call>", "</seed:tool_call>")
_SEED_THINK_END = "</seed:think>"


def seed_oss(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<function=name>`` calls in ``<seed:tool_call>``, after the ``<seed:think>`` reasoning."""
    thought = text.rfind(_SEED_THINK_END)
    start = thought + len(_SEED_THINK_END) if thought >= 0 else 0
    if "<seed:tool_call>" not in text[start:]:
        return None
    return _functions(text, _SEED_BLOCK, start, tools)


def _functions(text: str, block: re.Pattern[str], start: int, tools: Tools) -> TextToolCalls:
    """The ``<function=…>`` calls in ``block``s (or bare) from ``start`` on."""
    blocks = [b for b in block.finditer(text, start) if "<function=" in b.group(1)]
    spans = [(b.start(), b.end(), b.group(1)) for b in blocks] or [
        (f.start(), f.end(), f.group(0)) for f in _QWEN_FUNCTION.finditer(text, start)
    ]
    found = TextToolCalls(text)
    kept, pos = [], 0
    for begin, end, body in spans:
        kept.append(text[pos:begin])
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

_GLM_BLOCK = _QWEN_BLOCK
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


_HY_SECTION = re.compile(r"<tool_calls([^<>\s]*)>(.*?)(?:</tool_calls\1>|\Z)", re.DOTALL)


def hy_v3(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<tool_calls>`` holding GLM-style calls (Hy3, whose name ends with ``<tool_sep>``; Hy4,
    whose every tag may carry the checkpoint's suffix, ``<tool_call:opensource>``); JSON calls
    there are read as Hunyuan-A13B's (``minimax``)."""
    section = _HY_SECTION.search(text)
    if section is None:
        return None
    suffix, calls = section.group(1), section.group(2)
    calls = calls.replace(suffix + ">", ">") if suffix else calls
    found = glm45(calls.replace("<tool_sep>", ""), tools)
    if found is None:  # JSON calls: Hunyuan-A13B's layout, which SGLang's name also covers
        return minimax(text, tools)
    if not found.calls:
        found.text = text
        return found
    return found.finish(text[: section.start()] + found.text + text[section.end() :])


# ------------------------------------------------------------------ minimax_m2

_STRING_ATTRIBUTE = re.compile(r"""\bstring\s*=\s*["']?(true|false)""")


_CDATA = re.compile(r"\A<!\[CDATA\[(.*)\]\]>\Z", re.DOTALL)


def invoke_format(
    block: str,
    namespace: str = "",
    *,
    strip: bool = True,
    tags: tuple[str, str] = ("invoke", "parameter"),
    space: str = r"\s+",
) -> Parser:
    """A parser for ``<NSinvoke name="f"><NSparameter name="k">v</NSparameter></NSinvoke>`` calls
    inside the ``block`` pattern's first group (``tags`` renames the two elements, ``space`` is
    what separates an element from its ``name=``). ``strip``: the spaces, tabs and one line
    break around a value are markup, not data (MiniMax-M2); without it a value is kept as
    written. A value wrapped in ``<![CDATA[…]]>`` is the text inside. A value whose end tag is
    missing ends where the next parameter begins; a call whose end tag is missing ends with the
    block, when the block's end marker was written."""
    blocks = re.compile(block, re.DOTALL)
    ns = re.escape(namespace)
    call_tag, parameter_tag = (re.escape(t) for t in tags)
    invoke = re.compile(
        rf"<{ns}{call_tag}{space}name=[\"']?([^\"'>]+)[\"']?\s*>(.*?)(</{ns}{call_tag}>|\Z)",
        re.DOTALL,
    )
    parameter = re.compile(
        rf"<{ns}{parameter_tag}{space}name=[\"']?([^\"'>]+)[\"']?([^>]*)>(.*?)"
        rf"(?:</{ns}{parameter_tag}>|(?=<{ns}{parameter_tag}{space}name=)|\Z)",
        re.DOTALL,
    )

    def parse(text: str, tools: Tools = None) -> TextToolCalls | None:
        found_blocks = list(blocks.finditer(text))
        if not found_blocks:
            return None
        found = TextToolCalls(text)
        kept, pos = [], 0
        for block in found_blocks:
            kept.append(text[pos : block.start()])
            pos = block.end()
            closed = block.end(1) < block.end()  # the block's own end marker was written
            invokes = list(invoke.finditer(block.group(1)))
            if not invokes:
                found.failures.append(
                    f"the tool-call block holds no <{namespace}{tags[0]} name=...>"
                )
            for call in invokes:
                name = call.group(1).strip()
                if not call.group(3) and not closed:
                    found.failures.append(f"{name[:80]!r}: <{namespace}{tags[0]}> never closed")
                    continue
                pairs, kinds = [], {}
                for m in parameter.finditer(call.group(2)):
                    value = _trim_newline(m.group(3).strip(" \t")) if strip else m.group(3)
                    cdata = _CDATA.match(value)
                    pairs.append((m.group(1), cdata.group(1) if cdata else value))
                    marked = _STRING_ATTRIBUTE.search(m.group(2))
                    if marked is not None and marked.group(1) == "true":
                        kinds[m.group(1).strip()] = "string"
                _add_call(name, pairs, tools, found, kinds)
        kept.append(text[pos:])
        return found.finish("".join(kept))

    return parse


minimax_m2 = invoke_format(r"<minimax:tool_call>(.*?)(?:</minimax:tool_call>|\Z)")
"""``<invoke name=…>`` calls with ``<parameter name=…>`` values (MiniMax-M2)."""

step3 = invoke_format(
    r"<｜tool_calls_begin｜>(.*?)(?:<｜tool_calls_end｜>|\Z)", "steptml:", strip=False
)
"""``<steptml:invoke name=…>`` calls between ``<｜tool_calls_begin｜>`` and
``<｜tool_calls_end｜>`` (Step-3); a string value keeps the spaces around it."""

step_deepresearch = invoke_format(
    r"<steptml:toolcall>(.*?)(?:</steptml:toolcall>|\Z)", "steptml:", strip=False
)
"""``<steptml:invoke name=…>`` calls inside ``<steptml:toolcall>`` (Step DeepResearch)."""

gigachat35 = invoke_format(
    r"<｜GCML｜tool_calls>(.*?)(?:</｜GCML｜tool_calls>|\Z)", "｜GCML｜", strip=False
)
"""GigaChat 3.5's GCML calls: ``<｜GCML｜invoke name=…>`` with ``<｜GCML｜parameter name=…
string="true">`` values inside ``<｜GCML｜tool_calls>``."""

_dsml = invoke_format(r"<｜DSML｜function_calls>(.*?)(?:</｜DSML｜function_calls>|\Z)", "｜DSML｜")


def deepseek_v32(text: str, tools: Tools = None) -> TextToolCalls | None:
    """DeepSeek-V3.2's DSML calls (``<｜DSML｜invoke name=…>``); the V3.1 layout its earlier
    template wrote is read too."""
    return _dsml(text, tools) if "<｜DSML｜function_calls>" in text else deepseek(text, tools)


deepseek_v4 = invoke_format(
    r"<｜DSML｜tool_calls>(.*?)(?:</｜DSML｜tool_calls>|\Z)", "｜DSML｜", strip=False
)
"""DeepSeek-V4's DSML calls: V3.2's ``<｜DSML｜invoke name=…>`` inside ``<｜DSML｜tool_calls>``."""

minicpm5 = invoke_format(
    r"(<function[\sĠ]*name=.*?(?:</function>|\Z))", tags=("function", "param"), space=r"[\sĠ]*"
)
"""``<function name="NAME"><param name="KEY">value</param></function>`` (MiniCPM 5): the
tokenizer's ``Ġ`` may stand for the space, or the space may be missing; a call without its
``</function>`` is not read."""

_DOTS_BLOCK = enclosed("<dots_function_call>", "</dots_function_call>")
_dots_invokes = invoke_format(r"\A<dots_function_call>(.*)")
_dots_json = tagged_json("<dots_function_call>", "</dots_function_call>")


def dots(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<dots_function_call>`` blocks, each holding ``<invoke name=…><parameter name=…>``
    calls or one JSON call (dots)."""
    if "<dots_function_call>" not in text:
        return None
    found = TextToolCalls(text)
    kept, pos = [], 0
    for block in _DOTS_BLOCK.finditer(text):
        read = _dots_invokes if block.group(1).lstrip().startswith("<invoke") else _dots_json
        part = read(block.group(0), tools) or TextToolCalls(block.group(0))
        found.failures.extend(part.failures)
        for call, strategy in zip(part.calls, part.strategies, strict=True):
            function = call.function
            found.add(ParsedToolCall(function.name, function.arguments, strategy), call.id)
        kept.append(text[pos : block.start()] + (part.text if not part.calls else ""))
        pos = block.end()
    kept.append(text[pos:])
    return found.finish("".join(kept))


_IFM_CALL = enclosed("<ifm|tool_call>", "</ifm|tool_call>")
_IFM_ARGUMENT = re.compile(
    r"<ifm\|arg_key>([^<]*)</ifm\|arg_key>\s*(?:<ifm\|arg_type>([^<]*)</ifm\|arg_type>\s*)?"
    r"<ifm\|arg_value>(.*?)(?:</ifm\|arg_value>|\Z)",
    re.DOTALL,
)
_IFM_GROUP = re.compile(r"<ifm\|tool_calls>\s*</ifm\|tool_calls>|</?ifm\|tool_calls>")


def k2_horizon(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<ifm|tool_call>NAME<ifm|arg_key>KEY</ifm|arg_key>[<ifm|arg_type>TYPE</ifm|arg_type>]
    <ifm|arg_value>value</ifm|arg_value></ifm|tool_call>`` calls, or a JSON call inside, within
    ``<ifm|tool_calls>`` (K2 Horizon); a group never closed is not read."""
    if "<ifm|tool_call>" not in text:
        return None
    found = TextToolCalls(text)
    group = text.find("<ifm|tool_calls>")
    if group >= 0 and text.find("</ifm|tool_calls>", group) < 0:
        found.failures.append("<ifm|tool_calls> never closed")
        return found
    types = parameter_types(tools)
    kept, pos = [], 0
    for call in _IFM_CALL.finditer(text):
        body = call.group(1)
        if not call.group(2):
            found.failures.append("<ifm|tool_call> never closed")
            continue
        kept.append(text[pos : call.start()])
        pos = call.end()
        if body.lstrip().startswith(("{", "[")):
            read_call_list(body, found)
            continue
        name = body.split("<ifm|arg_key>", 1)[0].strip()
        arguments = list(_IFM_ARGUMENT.finditer(body))
        if not name or "<" in name or len(arguments) != body.count("<ifm|arg_key>"):
            found.failures.append("a K2 Horizon call without a name or with broken arguments")
            continue
        kinds = types.get(name, {})
        pairs = [(a.group(1).strip(), a.group(3), (a.group(2) or "").strip()) for a in arguments]
        found.add_arguments(
            name,
            {k: parameter_value(v, kinds.get(k) or written or None) for k, v, written in pairs},
        )
    kept.append(text[pos:])
    return found.finish(_IFM_GROUP.sub("", "".join(kept)))
