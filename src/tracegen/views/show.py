"""`tracegen show`: one trace in the terminal, steps coloured by kind, code highlighted.

Model text goes through `rich.text.Text`, never markup, so ``[bold]`` in a trace is shown
as written. Without a terminal (a pipe, a file) the output is plain text.

However large the trace, what is shown is bounded: the first `MAX_ITEMS` steps, messages
and test rows, the first `MAX_CHARS` characters of each text, each cut noted with what
was left out; the parts are printed one by one. Logprobs are never shown, nor validated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from tracegen.errors import ConfigError, InputFileError, JsonlError
from tracegen.jsonl import explain, iter_raw_lines, validate
from tracegen.schema import ChatMessage, Step, Trace
from tracegen.terminal import console, printable, text_table, untrusted

STYLES = {
    "think": "cyan",
    "code": "green",
    "verify": "bright_green",
    "result": "green",
    "error": "red",
    "plan": "blue",
    "reflection": "magenta",
    "tool_call": "yellow",
    "tool_response": "bright_yellow",
    "answer": "bold white",
    "text": "white",
}
ROLE_STYLES = {"system": "dim", "user": "blue", "assistant": "cyan", "tool": "yellow"}
THEME = "ansi_dark"
MAX_ITEMS = 200
"""Steps, messages and test rows shown of one trace."""
MAX_CHARS = 20_000
"""Characters shown of one text (a step, a message); table cells and header values get
`MAX_CELL` characters."""
MAX_CELL = 1_000


@dataclass
class Shown:
    """A trace as `tracegen show` renders it: long lists cut, and how much each lost."""

    trace: Trace
    hidden: dict[str, int] = field(default_factory=dict)


def _clip(text: str, limit: int = MAX_CHARS) -> tuple[str, Text | None]:
    """``text`` cut to ``limit`` characters, and the note saying so (None if it was not)."""
    if len(text) <= limit:
        return text, None
    note = Text(f"… {len(text) - limit:,} more characters not shown", style="dim")
    return text[:limit], note


def _cell(text: str) -> Text:
    clipped, note = _clip(text, MAX_CELL)
    return untrusted(clipped if note is None else f"{clipped}… ({len(text) - MAX_CELL:,} more)")


def _text(text: str, style: str = "") -> RenderableType:
    clipped, note = _clip(text)
    shown = untrusted(clipped, style=style)
    return shown if note is None else Group(shown, note)


def _code(text: str, lexer: str = "python") -> RenderableType:
    clipped, note = _clip(text)
    clipped = printable(clipped)
    code = Syntax(clipped, lexer, theme=THEME, word_wrap=True, background_color="default")
    return code if note is None else Group(code, note)


def _tool_call(text: str) -> RenderableType:
    """A tool call's JSON; its ``arguments.code`` shown as highlighted Python."""
    try:
        call = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _text(text)
    function = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return _code(orjson.dumps(call, option=orjson.OPT_INDENT_2).decode(), "json")
    args = function.get("arguments")
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        name = untrusted(f"{function.get('name', '?')}(code=…)", style="bold")
        return Group(name, _code(args["code"]))
    return _code(orjson.dumps(call, option=orjson.OPT_INDENT_2).decode(), "json")


def _json_or_text(text: str) -> RenderableType:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _text(text)
    return _code(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode(), "json")


def _step(step: Step) -> Panel:
    if step.kind == "code":
        body: RenderableType = _code(step.text)
    elif step.kind == "tool_call":
        body = _tool_call(step.text)
    elif step.kind == "tool_response":
        body = _json_or_text(step.text)
    else:
        body = _text(step.text, style="italic" if step.kind == "think" else "")
    title = step.kind + (" · system" if step.source == "system" else "")
    if step.parse_strategy:
        title += f" · parsed {step.parse_strategy}"
    return Panel(body, title=untrusted(title), title_align="left", border_style=STYLES[step.kind])


def _message(message: ChatMessage) -> Panel:
    parts: list[RenderableType] = []
    if message.thinking:
        parts.append(_text(message.thinking, style="italic cyan"))
    if message.content:
        parts.append(_text(message.content))
    for call in message.tool_calls or []:
        parts.append(_tool_call(call.model_dump_json()))
    title = message.role + (f" · {message.tool_name}" if message.tool_name else "")
    style = ROLE_STYLES[message.role]
    return Panel(Group(*parts), title=untrusted(title), title_align="left", border_style=style)


def _header(trace: Trace) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    verdict = "success" if trace.success else "failed"
    rows: list[tuple[str, str]] = [
        ("trace", trace.id),
        ("problem", f"{trace.problem_id} (sample {trace.sample})"),
        ("mode / model", f"{trace.mode} / {trace.model}"),
        ("created", trace.created_at.isoformat(timespec="seconds")),
        ("score", f"{trace.score:.2f} ({verdict}, reward {trace.reward:+.2f})"),
        ("ideal", "yes" if trace.is_ideal else "no"),
        ("logprobs", trace.logprobs_status),
    ]
    if trace.continuation:
        rows.append(("continuation", trace.continuation))
    for key, value in rows:
        grid.add_row(key, _cell(value))
    return grid


def _tests(shown: Shown) -> Table | None:
    verdict = shown.trace.verdict
    if verdict is None:
        return None
    table = text_table(
        title=untrusted(f"Tests: {verdict.passed}/{verdict.total} passed ({verdict.status})"),
        title_justify="left",
    )
    for name in ("test", "", "expected", "actual", "error"):
        table.add_column(name, overflow="fold")
    for t in verdict.tests:
        mark = Text("✓", style="green") if t.passed else Text("✗", style="red")
        cells = (_cell(v or "") for v in (t.expected, t.actual, t.error))
        table.add_row(_cell(t.name), mark, *cells)
    if shown.hidden.get("tests"):
        table.caption = f"… {shown.hidden['tests']:,} more tests not shown"
    return table


def _metrics(trace: Trace) -> Table:
    table = text_table(title="Metrics", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for name, value in trace.metrics.model_dump().items():
        if value:
            table.add_row(name, _cell(str(value)))
    usage = trace.usage
    table.add_row("requests", str(usage.requests))
    table.add_row(
        "tokens (prompt / completion)", f"{usage.prompt_tokens} / {usage.completion_tokens}"
    )
    return table


def _more(shown: Shown, what: str) -> Text | None:
    n = shown.hidden.get(what)
    if not n:
        return None
    return Text(f"… {n:,} more {what} not shown (the first {MAX_ITEMS:,} are)", style="dim")


def render_parts(shown: Shown) -> Iterator[RenderableType]:
    """Everything `tracegen show` prints for one trace, part by part."""
    trace = shown.trace
    yield _header(trace)
    problem = next((m for m in trace.messages if m.role == "user"), None)
    if problem is not None:
        yield Panel(_text(problem.content), title="problem", title_align="left")
    if trace.steps:
        yield from (_step(step) for step in trace.steps)
        more = _more(shown, "steps")
    else:
        others = (m for m in trace.messages if m is not problem and m.role != "system")
        yield from (_message(m) for m in others)
        more = _more(shown, "messages")
    if more is not None:
        yield more
    tests = _tests(shown)
    if tests is not None:
        yield tests
    yield _metrics(trace)
    if trace.error is not None:
        message = f"{trace.error.kind}/{trace.error.reason}: {trace.error.message}"
        yield Panel(_text(message), title="episode failed", border_style="red")


def render_trace(trace: Trace) -> Group:
    """Everything `tracegen show` prints for one whole trace, as one renderable."""
    return Group(*render_parts(Shown(trace)))


def _trimmed(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """``obj`` without its logprobs, its lists cut to `MAX_ITEMS`; how many each lost."""
    obj = {k: v for k, v in obj.items() if k != "logprobs"}
    if isinstance(obj.get("verdict"), dict):
        obj["verdict"] = dict(obj["verdict"])
    hidden: dict[str, int] = {}
    for holder, key in ((obj, "steps"), (obj, "messages"), (obj.get("verdict"), "tests")):
        if not isinstance(holder, dict):
            continue
        items = holder.get(key)
        if isinstance(items, list) and len(items) > MAX_ITEMS:
            hidden[key] = len(items) - MAX_ITEMS
            holder[key] = items[:MAX_ITEMS]
    return obj, hidden


class _Head(msgspec.Struct, gc=False):
    """What picking a trace needs from each line; the rest is read for the one shown."""

    id: Any = None
    success: Any = None


_HEAD = msgspec.json.Decoder(_Head)


def _candidates(path: Path, only_failed: bool) -> Iterator[tuple[int, bytes, _Head]]:
    for lineno, raw in iter_raw_lines(path):
        try:
            head = _HEAD.decode(raw)
        except msgspec.MsgspecError as e:
            raise JsonlError(f"{path}:{lineno}: {explain(e, 'trace')}") from None
        if not only_failed or head.success is not True:
            yield lineno, raw, head


def find_trace(
    path: Path, *, index: int | None = None, trace_id: str | None = None, only_failed: bool = False
) -> Shown:
    """The trace with ``trace_id``, or at ``index`` (0-based; failures only if ``only_failed``),
    trimmed for showing (see `Shown`)."""
    if index is not None and trace_id is not None:
        raise ConfigError("give --index or --id, not both")
    if index is not None and index < 0:
        raise ConfigError(f"--index: expected 0 or more, got {index}")
    which = "failed trace" if only_failed else "trace"
    seen = 0
    for lineno, raw, head in _candidates(path, only_failed):
        if trace_id is not None and head.id != trace_id:
            continue
        if trace_id is None and seen < (index or 0):
            seen += 1
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise JsonlError(f"{path}:{lineno}: not valid JSON ({e})") from None
        trimmed, hidden = _trimmed(obj)
        return Shown(validate(trimmed, Trace, path, lineno), hidden)
    if trace_id is not None:
        raise InputFileError(f"{path}: no {which} with id {trace_id!r}")
    raise InputFileError(f"{path}: no {which} at index {index or 0} ({seen} in the file)")


def show_command(
    *, file: Path, index: int | None = None, trace_id: str | None = None, only_failed: bool = False
) -> None:
    """Print one trace of ``file``; plain text when stdout is not a terminal."""
    shown = find_trace(file, index=index, trace_id=trace_id, only_failed=only_failed)
    out = console(highlight=False)
    for part in render_parts(shown):
        out.print(part)
