"""The text formats: a trace as OpenAI chat, ShareGPT, or one folded assistant message.

Each is a `TextFormat`: one record per trace, the kept trace fields, the format's body, and the
logprobs when ``--keep-logprobs`` keeps them.

Text inside tags is escaped so that a tag written *inside* a block (a ``"</tool_response>"``
string in code, a tool's output that prints ``</code>``) cannot end it:

- in JSON bodies (``<tool_call>``, ``<tool_response>``) the ``<`` of a tracegen tag becomes
  ``\\u003c``, which any JSON parser reads back as ``<``;
- in other bodies it becomes ``&lt;``, and an ``&lt;`` already there before a tag name gains
  one ``amp;`` (``&amp;lt;``) so `unescape_tags` restores the text exactly.

Only a ``<`` (or ``&lt;``) directly followed by a tracegen tag (``<code>``, ``</think>``…) is
touched; ``a < b`` and ``a<b`` stay as they are. Bodies are found through the trace's steps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

import orjson

from tracegen.export.builder import (
    BATCH_ROWS,
    ConvertCounts,
    ConvertOptions,
    Row,
    problem_index,
    steps_by_message,
    trace_columns,
)
from tracegen.schema import ChatMessage, Step, StepKind, Trace

if TYPE_CHECKING:
    from datasets import Features

KEPT_FIELDS = ("id", "problem_id", "sample", "mode", "model", "score", "success", "is_ideal")
JSON_KINDS = ("tool_call", "tool_response")
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}

_TAGS = "|".join(k for k in get_args(StepKind) if k != "text")
_TEXT_TAG = re.compile(rf"(?:<|&((?:amp;)*)lt;)(?=/?(?:{_TAGS})>)")
_ESCAPED_TAG = re.compile(rf"&((?:amp;)*)lt;(?=/?(?:{_TAGS})>)")
_JSON_TAG = re.compile(rf"<(?=/?(?:{_TAGS})>)")


def escape_tags(text: str) -> str:
    """Escape tracegen tags inside a text body (see the module docstring)."""
    return _TEXT_TAG.sub(lambda m: "&lt;" if m.group(0) == "<" else f"&amp;{m.group(1)}lt;", text)


def unescape_tags(text: str) -> str:
    """Undo `escape_tags`."""
    return _ESCAPED_TAG.sub(lambda m: f"&{m.group(1)[4:]}lt;" if m.group(1) else "<", text)


def escape_json_tags(text: str) -> str:
    """Escape tracegen tags inside a JSON body as ``\\u003c`` (JSON parsers undo it)."""
    return _JSON_TAG.sub(lambda _: "\\u003c", text)


def _escaper(kind: str) -> Callable[[str], str]:
    return escape_json_tags if kind in JSON_KINDS else escape_tags


def _escape_bodies(content: str, steps: list[Step]) -> str:
    """``content`` with each step's text escaped where it occurs, in order."""
    out: list[str] = []
    pos = 0
    for step in steps:
        escaped = _escaper(step.kind)(step.text)
        if escaped == step.text:
            continue
        at = content.find(step.text, pos)
        if at < 0:
            continue
        out += [content[pos:at], escaped]
        pos = at + len(step.text)
    out.append(content[pos:])
    return "".join(out)


def _think(thinking: str) -> str:
    return f"<think>\n{escape_tags(thinking)}\n</think>\n\n"


def _call_json(message: ChatMessage) -> list[str]:
    calls = message.tool_calls or []
    return [
        escape_json_tags(
            orjson.dumps({"name": c.function.name, "arguments": c.function.arguments}).decode()
        )
        for c in calls
    ]


def _tool_response(message: ChatMessage) -> str:
    try:
        content = orjson.loads(message.content)
    except orjson.JSONDecodeError:
        content = message.content
    body = orjson.dumps({"name": message.tool_name, "content": content}).decode()
    return f"<tool_response>\n{escape_json_tags(body)}\n</tool_response>"


def _turn_text(message: ChatMessage, steps: list[Step]) -> str:
    """One turn as tagged text: thinking, content, and structured tool calls/results."""
    if message.role == "tool":
        return _tool_response(message)
    text = _escape_bodies(message.content, steps)
    if message.role != "assistant":
        return text
    if message.thinking:
        text = _think(message.thinking) + text
    calls = [f"<tool_call>\n{c}\n</tool_call>" for c in _call_json(message)]
    return "\n".join([text.rstrip("\n"), *calls]) if calls else text


def _chat_message(message: ChatMessage, steps: list[Step], reasoning_field: bool) -> Row:
    content = _escape_bodies(message.content, steps)
    row: Row = {
        "role": message.role,
        "content": content,
        "tool_calls": None,
        "name": message.tool_name if message.role == "tool" else None,
    }
    if message.tool_calls:
        row["tool_calls"] = [
            {
                "id": call.id or f"call_{k}",
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": orjson.dumps(call.function.arguments).decode(),
                },
            }
            for k, call in enumerate(message.tool_calls)
        ]
    if reasoning_field:
        row["reasoning_content"] = (message.thinking or "") if message.role == "assistant" else None
    elif message.thinking:
        row["content"] = _think(message.thinking) + content
    return row


def _chat(trace: Trace, options: ConvertOptions) -> Row:
    steps = steps_by_message(trace)
    return {
        "messages": [
            _chat_message(m, steps[i], options.reasoning_field)
            for i, m in enumerate(trace.messages)
        ]
    }


def _chat_columns(options: ConvertOptions) -> dict[str, Any]:
    from datasets import List, Value

    string = Value("string")
    call = {"id": string, "type": string, "function": {"name": string, "arguments": string}}
    message = {"role": string, "content": string, "tool_calls": List(call), "name": string}
    if options.reasoning_field:
        message["reasoning_content"] = string
    return {"messages": List(message)}


def _sharegpt(trace: Trace, options: ConvertOptions) -> Row:
    steps = steps_by_message(trace)
    return {
        "conversations": [
            {"from": SHAREGPT_ROLES[m.role], "value": _turn_text(m, steps[i])}
            for i, m in enumerate(trace.messages)
        ]
    }


def _sharegpt_columns(options: ConvertOptions) -> dict[str, Any]:
    from datasets import List, Value

    return {"conversations": List({"from": Value("string"), "value": Value("string")})}


def _folded(trace: Trace, options: ConvertOptions) -> Row:
    """The problem, then every model turn and system result folded into one message."""
    steps = steps_by_message(trace)
    first = problem_index(trace) or 0
    pieces: list[str] = []
    for i in range(first + 1, len(trace.messages)):
        message = trace.messages[i]
        if message.role in ("assistant", "tool"):
            pieces.append(_turn_text(message, steps[i]))
        elif message.role == "user":
            pieces += [
                f"<{s.kind}>{_escaper(s.kind)(s.text)}</{s.kind}>"
                for s in steps[i]
                if s.source == "system"
            ]
    messages = [
        {"role": "user", "content": trace.messages[first].content},
        {"role": "assistant", "content": "\n".join(p for p in pieces if p)},
    ]
    return {"messages": messages}


def _folded_columns(options: ConvertOptions) -> dict[str, Any]:
    from datasets import List, Value

    return {"messages": List({"role": Value("string"), "content": Value("string")})}


@dataclass(frozen=True)
class TextFormat:
    """One record per trace: the kept trace fields, then ``body``'s columns (their features:
    ``columns``), then the logprobs per assistant turn when kept. ``folded``: the body has
    one assistant message, which every turn's logprobs point at."""

    body: Callable[[Trace, ConvertOptions], Row]
    columns: Callable[[ConvertOptions], dict[str, Any]]
    folded: bool = False

    def row(self, trace: Trace, options: ConvertOptions) -> Row:
        row: Row = {name: getattr(trace, name) for name in KEPT_FIELDS}
        row["reward"] = trace.reward
        row |= self.body(trace, options)
        if options.keep_logprobs:
            row["logprobs"] = self._logprobs(trace)
        return row

    def _logprobs(self, trace: Trace) -> list[Row]:
        """Per assistant turn; ``message_index`` points into the record's messages."""
        rows = [turn.model_dump(mode="json") for turn in trace.logprobs]
        if self.folded:
            for row in rows:
                row["message_index"] = 1
        return rows

    def features(self, options: ConvertOptions) -> Features:
        """The `datasets` schema of the records (for Hugging Face and Parquet output)."""
        from datasets import Features, List, Value

        columns = trace_columns((*KEPT_FIELDS, "reward")) | self.columns(options)
        if options.keep_logprobs:
            string = Value("string")
            top = {"token": string, "logprob": Value("float64"), "bytes": List(Value("int64"))}
            token = {**top, "top_logprobs": List(top)}
            columns["logprobs"] = List({"message_index": Value("int64"), "tokens": List(token)})
        return Features(columns)

    def builder(self, options: ConvertOptions, counts: ConvertCounts) -> TextBuilder:
        return TextBuilder(self, options)


@dataclass
class TextBuilder:
    """The `Builder` of a text format: a record per trace, nothing gathered."""

    fmt: TextFormat
    options: ConvertOptions
    batch_rows: int = BATCH_ROWS
    keeps_failures = False

    @property
    def reads_logprobs(self) -> bool:
        return self.options.keep_logprobs

    def rows(self, trace: Trace) -> Iterable[Row]:
        return (self.fmt.row(trace, self.options),)

    def gather(self, rows: Iterator[Row]) -> Iterator[Row]:
        return rows

    def summary(self) -> str:
        return ""

    def close(self) -> None:
        pass


CHAT = TextFormat(_chat, _chat_columns)
SHAREGPT = TextFormat(_sharegpt, _sharegpt_columns)
TRAINING = TextFormat(_folded, _folded_columns, folded=True)
