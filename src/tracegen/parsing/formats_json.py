"""Tool-call formats whose arguments are written as JSON.

- ``hermes`` (Hermes, Qwen2.5, Qwen3): ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``,
  several per message; the last one may be unclosed.
- ``llama3_json``: ``{"name": …, "parameters": {…}}`` anywhere in the text (several joined by
  ``;``, or a JSON list), maybe after ``<|python_tag|>``.
- ``mistral``: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`` (before v11), or
  ``[TOOL_CALLS]name{…}`` and ``[TOOL_CALLS]name[ARGS]{…}`` (v11 on; ``[CALL_ID]id`` before
  ``[ARGS]`` if present).
- ``granite`` (Granite 3.x): ``<|tool_call|>[…]`` or ``<tool_call>[…]``; ``granite-20b-fc``:
  ``<function_call> {…}`` per call.
- ``phi4_mini_json``: ``functools[…]``. ``xlam``: a JSON list of calls, bare, fenced, or after
  ``</think>``, ``[TOOL_CALLS]`` or ``<tool_call>``.
- ``minimax`` (MiniMax-M1): one JSON call a line between ``<tool_calls>`` and ``</tool_calls>``;
  Jamba and Hunyuan-A13B write a JSON list of calls there, read the same way (``jamba``,
  ``hunyuan_a13b``).
- ``internlm`` (InternLM2, Intern-S1): ``<|action_start|><|plugin|>{…}<|action_end|>``.
  ``longcat`` (LongCat-Flash): ``<longcat_tool_call>{…}</longcat_tool_call>``.
- ``apertus`` (Apertus): ``<|tools_prefix|>[{"name": {…arguments}}, …]<|tools_suffix|>``.
- ``gigachat3``: ``function call`` (or ``function call<|role_sep|>``, ``<|function_call|>``)
  followed by one JSON call.
- ``deepseek_v3``: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>name`` then a fenced JSON block;
  ``deepseek_v31``: ``<｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}<｜tool▁call▁end｜>``. Each
  reads the other's layout too.
- ``kimi_k2``: ``<|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{…}
  <|tool_call_end|>`` inside ``<|tool_calls_section_begin|>…<|tool_calls_section_end|>``.
- ``openai`` (gpt-oss, the harmony format): a ``commentary`` message addressed
  ``to=functions.name`` holds the arguments; the text left is the ``final`` channel's (and
  commentary without a recipient); the ``analysis`` channel is reasoning and is dropped.

Sources of the layouts: vLLM ``vllm/entrypoints/openai/tool_parsers/*_tool_parser.py`` (later
``vllm/tool_parsers/``) and
SGLang ``python/sglang/srt/function_call/*_detector.py``.
"""

from __future__ import annotations

import bisect
import re

from tracegen.parsing.textcalls import (
    Closings,
    Parser,
    TextToolCalls,
    Tools,
    balanced_end,
    enclosed,
    json_span,
    read_json_call,
    read_named_call,
)
from tracegen.parsing.toolcall import (
    ToolCallParseError,
    find_tool_call,
    from_json_object,
    load_json,
    parse_tool_call,
)

_SPLIT_OBJECTS = re.compile(r"""(?<=\})\s*,\s*(?=\{\s*["'](?:name|arguments)["'])""")


def read_call_list(body: str, found: TextToolCalls) -> None:
    """A JSON list of calls (or one call); when broken beyond repair, each element alone."""
    body = body.strip()
    loaded = load_json(body)
    if loaded is not None and isinstance(loaded[0], list | dict) and loaded[0]:
        items, strategy = loaded
        for item in items if isinstance(items, list) else [items]:
            try:
                parsed = from_json_object(item, strategy)
            except ToolCallParseError as e:
                found.failures.append(str(e))
            else:
                call_id = item.get("id") if isinstance(item, dict) else None
                found.add(parsed, call_id if isinstance(call_id, str) else None)
        return
    inner = body[1:] if body.startswith("[") else body
    inner = inner[:-1] if inner.rstrip().endswith("]") else inner
    for part in _SPLIT_OBJECTS.split(inner.strip()):
        read_json_call(part, found)


# ------------------------------------------------------------------ hermes


def hermes(text: str, tools: Tools = None) -> TextToolCalls | None:
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
    return found.finish("".join(kept))


# ------------------------------------------------------------------ llama3_json

_LLAMA_TAG = "<|python_tag|>"
_LLAMA_END = re.compile(r"(?:<\|eom_id\|>|<\|eot_id\|>)\s*\Z")
_LLAMA_OPEN = re.compile(r"""(?:\[\s*)?\{\s*["']name["']\s*:""")
_LLAMA_SEPARATOR = re.compile(r"\s*;?\s*")
_EMPTY_FENCE = re.compile(r"```(?:json)?\s*```")
_LLAMA_ARGS = re.compile(r"""["'](?:parameters|arguments)["']\s*:""")


def llama3_json(text: str, tools: Tools = None) -> TextToolCalls | None:
    """JSON calls with ``parameters`` (or ``arguments``) anywhere in the text, several joined
    by ``;`` or in a list, maybe after ``<|python_tag|>``."""
    body = _LLAMA_END.sub("", text)
    found = TextToolCalls(text)
    kept: list[str] = []
    tag = body.find(_LLAMA_TAG)
    pos = at = tag + len(_LLAMA_TAG) if tag >= 0 else 0
    if tag >= 0:
        kept.append(body[:tag])
    closings = Closings(body)
    arguments_at = [m.start() for m in _LLAMA_ARGS.finditer(body)]
    while (opening := _LLAMA_OPEN.search(body, at)) is not None:
        start = opening.start()
        end = closings.at(start) or len(body)
        first = bisect.bisect_left(arguments_at, start)
        if first == len(arguments_at) or arguments_at[first] >= end:  # no arguments: not a call
            at = opening.end()
            continue
        span = body[start:end]
        kept.append(body[pos:start])
        if span.startswith("["):
            read_call_list(span, found)
        else:
            read_json_call(span, found)
        separator = _LLAMA_SEPARATOR.match(body, end)
        pos = at = separator.end() if separator is not None else end
    if not found.calls and not found.failures:
        return None
    kept.append(body[pos:])
    return found.finish(_EMPTY_FENCE.sub("", "".join(kept)))


# ------------------------------------------------------------------ mistral

_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_END = re.compile(r"</s>\s*\Z")
_MISTRAL_NAME = re.compile(
    r"\s*(?P<name>[\w.\-]+)\s*(?:\[CALL_ID\]\s*(?P<id>[\w\-]+)\s*)?(?:\[ARGS\])?\s*(?=[{\[])"
)


def mistral(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``[TOOL_CALLS]`` followed by a JSON list, or by ``name{...}`` / ``name[ARGS]{...}``."""
    before, tag, rest = text.partition(_MISTRAL_TAG)
    if not tag:
        return None
    found = TextToolCalls(text)
    rest = _MISTRAL_END.sub("", rest)
    if rest.lstrip().startswith(("[", "{")):
        read_call_list(rest, found)
        return found.finish(before)
    pos = 0
    while pos < len(rest):
        if rest.startswith(_MISTRAL_TAG, pos):
            pos += len(_MISTRAL_TAG)
            continue
        if rest[pos] in " \t\r\n,":
            pos += 1
            continue
        head = _MISTRAL_NAME.match(rest, pos)
        if head is None:
            found.failures.append("[TOOL_CALLS] not followed by a name and its JSON arguments")
            break
        start = head.end()
        end = balanced_end(rest, start) or len(rest)
        read_named_call(head["name"], rest[start:end], found, head["id"])
        pos = end
    return found.finish(before)


# ------------------------------------------------------------------ granite, phi4, xlam

_GRANITE_TAG = re.compile(r"<\|tool_call\|>|<tool_call>(?=\s*\[)")
_GRANITE_FC = "<function_call>"


def granite(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|tool_call|>[...]`` (Granite 3.0) or ``<tool_call>[...]`` (3.1 on)."""
    tag = _GRANITE_TAG.search(text)
    if tag is None:
        return None
    body = text[tag.end() :].strip()
    body = body.removesuffix("</tool_call>").strip()
    found = TextToolCalls(text)
    read_call_list(body, found)
    return found.finish(text[: tag.start()])


def granite_20b_fc(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<function_call> {...}`` once per call (Granite-20B-FunctionCalling)."""
    if _GRANITE_FC not in text:
        return None
    before, _, rest = text.partition(_GRANITE_FC)
    found = TextToolCalls(text)
    for part in rest.split(_GRANITE_FC):
        read_json_call(part, found)
    return found.finish(before)


_PHI4_TAG = "functools["
_PHI4_BLOCK = enclosed("<|tool_call|>", "<|/tool_call|>")


def phi4_mini_json(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``functools[{"name": ..., "arguments": {...}}, ...]`` (Phi-4-mini), or one call per
    ``<|tool_call|>{...}<|/tool_call|>`` (llama.cpp's template for it)."""
    at = text.find(_PHI4_TAG)
    if at < 0:
        return _phi4_blocks(text) if "<|/tool_call|>" in text else None
    start = at + len(_PHI4_TAG) - 1
    end = balanced_end(text, start) or len(text)
    found = TextToolCalls(text)
    read_call_list(text[start:end], found)
    return found.finish(text[:at] + text[end:])


def _phi4_blocks(text: str) -> TextToolCalls:
    found = TextToolCalls(text)
    kept, pos = [], 0
    for block in _PHI4_BLOCK.finditer(text):
        kept.append(text[pos : block.start()])
        pos = block.end()
        read_json_call(block.group(1), found)
    kept.append(text[pos:])
    return found.finish("".join(kept))


_THINK_END = "</think>"
_FENCE = re.compile(r"```(?:json)?[ \t]*\r?\n(.*?)\r?\n?```", re.DOTALL)
_CALL_LIST = re.compile(r"""\[\s*\{\s*["'](?:name|arguments)["']""")


def xlam(text: str, tools: Tools = None) -> TextToolCalls | None:
    """A JSON list of calls: bare, fenced, after ``</think>``, ``[TOOL_CALLS]`` or in
    ``<tool_call>`` tags (Salesforce xLAM)."""
    head, think, body = text.rpartition(_THINK_END)
    prefix = head + think
    fenced = _FENCE.search(body)
    if fenced is not None and _CALL_LIST.match(fenced.group(1).strip()):
        found = TextToolCalls(text)
        read_call_list(fenced.group(1), found)
        return found.finish(prefix + body[: fenced.start()] + body[fenced.end() :])
    for tag in ("[TOOL_CALLS]", "<tool_call>"):
        if tag in body:
            before, _, rest = body.partition(tag)
            if _CALL_LIST.match(rest.strip()) or rest.lstrip().startswith("{"):
                found = TextToolCalls(text)
                read_call_list(rest.replace("</tool_call>", "").strip(), found)
                return found.finish(prefix + before)
    listed = _CALL_LIST.search(body)
    if listed is None:
        return None
    end = balanced_end(body, listed.start())
    if (end is not None and body[end:].strip()) or not _LLAMA_ARGS.search(body, listed.start()):
        return None
    found = TextToolCalls(text)
    read_call_list(body[listed.start() : end], found)
    return found.finish(prefix + body[: listed.start()])


# ------------------------------------------------------------------ minimax

_MINIMAX = enclosed("<tool_calls>", "</tool_calls>")


def minimax(text: str, tools: Tools = None) -> TextToolCalls | None:
    """JSON calls between ``<tool_calls>`` and ``</tool_calls>``, one a line (MiniMax-M1) or in
    a list (Jamba, Hunyuan-A13B); a block inside the ``<think>`` reasoning is not a call."""
    thought = text.rfind(_THINK_END)
    block = _MINIMAX.search(text, thought + len(_THINK_END) if thought >= 0 else 0)
    if block is None:
        return None
    found = TextToolCalls(text)
    body, pos = block.group(1), 0
    while (start := body.find("{", pos)) >= 0:
        call = json_span(body, start)
        read_json_call(call, found)
        pos = start + len(call)
    if not found.calls and not found.failures:
        found.failures.append("<tool_calls> holds no JSON call")
    return found.finish(text[: block.start()] + text[block.end() :])


# ------------------------------------------------------------------ deepseek

_BAR = "[｜|]"
_DS_CALLS_BEGIN = re.compile(rf"<{_BAR}tool▁calls▁begin{_BAR}>")
_DS_CALLS_END = re.compile(rf"<{_BAR}tool▁calls▁end{_BAR}>")
_DS_CALL = re.compile(
    rf"<{_BAR}tool▁call▁begin{_BAR}>(?P<head>[^<]*?)<{_BAR}tool▁sep{_BAR}>(?P<body>.*?)"
    rf"(?:<{_BAR}tool▁call▁end{_BAR}>|(?=<{_BAR}tool▁call▁begin{_BAR}>)|(?=<{_BAR}tool▁calls▁end)|\Z)",
    re.DOTALL,
)
_DS_V3_BODY = re.compile(
    r"\A\s*(?P<name>[^\n`]+?)\s*\n\s*```(?:json)?\s*\n?(?P<args>.*?)\s*(?:```\s*)?\Z", re.DOTALL
)


def deepseek(text: str, tools: Tools = None) -> TextToolCalls | None:
    """DeepSeek-V3's and V3.1's tool calls (either layout, whichever name asked)."""
    begin = _DS_CALLS_BEGIN.search(text)
    first = _DS_CALL.search(text)
    if begin is None and first is None:
        return None
    start = begin.start() if begin is not None else first.start() if first is not None else 0
    found = TextToolCalls(text)
    end = start
    for call in _DS_CALL.finditer(text, start):
        head, body = call["head"].strip(), call["body"]
        v3 = _DS_V3_BODY.match(body)
        if v3 is not None and (head in ("function", "") or not body.lstrip().startswith("{")):
            read_named_call(v3["name"], v3["args"], found)
        else:
            read_named_call(head, body, found)
        end = call.end()
    if not found.calls and not found.failures:
        found.failures.append("DeepSeek tool-call markers without a call")
    closing = _DS_CALLS_END.search(text, end)
    after = text[closing.end() :] if closing is not None else text[end:]
    return found.finish(text[:start] + after)


# ------------------------------------------------------------------ kimi_k2

_KIMI_SECTION = enclosed("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")
_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<id>[^<]*?)\s*<\|tool_call_argument_begin\|>(?P<args>.*?)"
    r"(?:<\|tool_call_end\|>|(?=<\|tool_call_begin\|>)|\Z)",
    re.DOTALL,
)
_KIMI_ID = re.compile(r"\A(?:functions\.)?(?P<name>[\w\-.]+?):(?P<index>\d+)\Z")


def kimi_k2(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>``."""
    section = _KIMI_SECTION.search(text)
    if section is None:
        return None
    found = TextToolCalls(text)
    for call in _KIMI_CALL.finditer(section.group(1)):
        call_id = call["id"].strip()
        named = _KIMI_ID.match(call_id)
        if named is None:
            found.failures.append(f"kimi_k2 call id {call_id!r} is not functions.NAME:INDEX")
            continue
        read_named_call(named["name"], call["args"], found, call_id)
    if not found.calls and not found.failures:
        found.failures.append("<|tool_calls_section_begin|> holds no call")
    return found.finish(text[: section.start()] + text[section.end() :])


# ------------------------------------------------------------------ openai (harmony)

_HARMONY_MESSAGE = re.compile(
    r"(?P<header>(?:(?!<\|message\|>).)*?)<\|message\|>(?P<body>.*?)"
    r"(?P<end><\|end\|>|<\|call\|>|<\|return\|>|(?=<\|start\|>)|\Z)",
    re.DOTALL,
)
_HARMONY_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")
_HARMONY_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


def openai(text: str, tools: Tools = None) -> TextToolCalls | None:
    """gpt-oss messages in the harmony format; calls are ``to=functions.NAME`` messages."""
    if "<|channel|>" not in text or "<|message|>" not in text:
        return None
    found = TextToolCalls(text)
    content: list[str] = []
    for message in _HARMONY_MESSAGE.finditer(text):
        header = message["header"]
        channel = _HARMONY_CHANNEL.search(header)
        recipient = _HARMONY_RECIPIENT.search(header)
        if recipient is not None:
            name = recipient.group(1).removeprefix("functions.")
            read_named_call(name, message["body"], found, None)
        elif channel is None or channel.group(1) != "analysis":
            content.append(message["body"].strip())
    if not found.calls and not found.failures:
        return None
    return found.finish("\n".join(c for c in content if c))


# ------------------------------------------------------------------ internlm, longcat


def tagged_json(opening: str, closing: str) -> Parser:
    """A parser for one JSON call per ``opening``…``closing`` block (the last may be unclosed);
    a block that cannot be read stays in the text."""

    def parse(text: str, tools: Tools = None) -> TextToolCalls | None:
        if opening not in text:
            return None
        found = TextToolCalls(text)
        kept: list[str] = []
        pos = 0
        while (at := text.find(opening, pos)) >= 0:
            body = at + len(opening)
            close = text.find(closing, body)
            end = close if close >= 0 else len(text)
            after = end + len(closing) if close >= 0 else end
            failures = len(found.failures)
            read_json_call(text[body:end], found)
            kept.append(text[pos : after if len(found.failures) > failures else at])
            pos = after
        kept.append(text[pos:])
        return found.finish("".join(kept))

    return parse


internlm = tagged_json("<|action_start|><|plugin|>", "<|action_end|>")
"""``<|action_start|><|plugin|>{"name": …, "parameters": {…}}<|action_end|>`` (InternLM2)."""

longcat = tagged_json("<longcat_tool_call>", "</longcat_tool_call>")
"""``<longcat_tool_call>{"name": …, "arguments": {…}}</longcat_tool_call>`` (LongCat-Flash)."""


# ------------------------------------------------------------------ gigachat3

_GIGACHAT = re.compile(r"(?:function call(?:<\|role_sep\|>)?|<\|function_call\|>)\s*(?=\{)")
_GIGACHAT_SEPARATOR = "<|message_sep|>"


def gigachat3(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``function call{"name": …, "arguments": {…}}`` (GigaChat 3): the text before it is the
    message (its ``<|message_sep|>`` dropped)."""
    marker = _GIGACHAT.search(text)
    if marker is None:
        return None
    start = marker.end()
    end = balanced_end(text, start) or len(text)
    found = TextToolCalls(text)
    read_json_call(text[start:end], found)
    before = text[: marker.start()].rstrip().removesuffix(_GIGACHAT_SEPARATOR)
    return found.finish(before + text[end:])


# ------------------------------------------------------------------ apertus

_APERTUS_PREFIX = "<|tools_prefix|>"
_APERTUS_SUFFIX = "<|tools_suffix|>"


def apertus(text: str, tools: Tools = None) -> TextToolCalls | None:
    """``<|tools_prefix|>`` then a JSON list of ``{"name": {arguments}}`` (Apertus)."""
    at = text.find(_APERTUS_PREFIX)
    if at < 0:
        return None
    found = TextToolCalls(text)
    start = at + len(_APERTUS_PREFIX)
    start += len(text[start:]) - len(text[start:].lstrip())
    end = balanced_end(text, start) if text.startswith("[", start) else None
    loaded = load_json(text[start:end]) if end is not None else None
    if loaded is None or not isinstance(loaded[0], list):
        found.failures.append(f"{_APERTUS_PREFIX} not followed by a whole JSON list of calls")
        return found
    for item in loaded[0]:
        if not (isinstance(item, dict) and len(item) == 1):
            found.failures.append('an Apertus call is not {"name": {arguments}}')
            continue
        ((name, arguments),) = item.items()
        if not isinstance(arguments, dict):
            found.failures.append(f"{str(name)[:80]!r}: the arguments are not a JSON object")
            continue
        found.add_arguments(str(name), arguments)
    after = text[end:].lstrip().removeprefix(_APERTUS_SUFFIX)
    return found.finish(text[:at] + after)
