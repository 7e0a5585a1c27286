"""`tracegen show`: one trace in the terminal, steps coloured by kind, code highlighted.

Model text goes through `rich.text.Text`, never markup, so ``[bold]`` in a trace is shown
as written. Without a terminal (a pipe, a file) the output is plain text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from tracegen.errors import ConfigError, InputFileError
from tracegen.jsonl import iter_lines, validate
from tracegen.schema import ChatMessage, Step, Trace

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


def _code(text: str, lexer: str = "python") -> Syntax:
    return Syntax(text, lexer, theme=THEME, word_wrap=True, background_color="default")


def _tool_call(text: str) -> RenderableType:
    """A tool call's JSON; its ``arguments.code`` shown as highlighted Python."""
    try:
        call = orjson.loads(text)
    except orjson.JSONDecodeError:
        return Text(text)
    function = call.get("function", call) if isinstance(call, dict) else None
    args = function.get("arguments") if isinstance(function, dict) else None
    if isinstance(function, dict) and isinstance(args, dict) and isinstance(args.get("code"), str):
        name = Text(f"{function.get('name', '?')}(code=…)", style="bold")
        return Group(name, _code(args["code"]))
    return _code(orjson.dumps(call, option=orjson.OPT_INDENT_2).decode(), "json")


def _json_or_text(text: str) -> RenderableType:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return Text(text)
    return _code(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode(), "json")


def _step(step: Step) -> Panel:
    if step.kind == "code":
        body: RenderableType = _code(step.text)
    elif step.kind == "tool_call":
        body = _tool_call(step.text)
    elif step.kind == "tool_response":
        body = _json_or_text(step.text)
    else:
        body = Text(step.text, style="italic" if step.kind == "think" else "")
    title = step.kind + (" · system" if step.source == "system" else "")
    if step.parse_strategy:
        title += f" · parsed {step.parse_strategy}"
    return Panel(body, title=title, title_align="left", border_style=STYLES[step.kind])


def _message(message: ChatMessage) -> Panel:
    parts: list[RenderableType] = []
    if message.thinking:
        parts.append(Text(message.thinking, style="italic cyan"))
    if message.content:
        parts.append(Text(message.content))
    for call in message.tool_calls or []:
        parts.append(_tool_call(call.model_dump_json()))
    title = message.role + (f" · {message.tool_name}" if message.tool_name else "")
    style = ROLE_STYLES[message.role]
    return Panel(Group(*parts), title=title, title_align="left", border_style=style)


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
        grid.add_row(key, Text(value))
    return grid


def _tests(trace: Trace) -> Table | None:
    verdict = trace.verdict
    if verdict is None:
        return None
    table = Table(
        title=f"Tests: {verdict.passed}/{verdict.total} passed ({verdict.status})",
        title_justify="left",
    )
    for name in ("test", "", "expected", "actual", "error"):
        table.add_column(name, overflow="fold")
    for t in verdict.tests:
        mark = Text("✓", style="green") if t.passed else Text("✗", style="red")
        table.add_row(
            t.name, mark, Text(t.expected or ""), Text(t.actual or ""), Text(t.error or "")
        )
    return table


def _metrics(trace: Trace) -> Table:
    table = Table(title="Metrics", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for name, value in trace.metrics.model_dump().items():
        if value:
            table.add_row(name, Text(str(value)))
    usage = trace.usage
    table.add_row("requests", str(usage.requests))
    table.add_row(
        "tokens (prompt / completion)", f"{usage.prompt_tokens} / {usage.completion_tokens}"
    )
    return table


def render_trace(trace: Trace) -> Group:
    """Everything `tracegen show` prints for one trace."""
    parts: list[RenderableType | None] = [_header(trace)]
    problem = next((m for m in trace.messages if m.role == "user"), None)
    if problem is not None:
        parts.append(Panel(Text(problem.content), title="problem", title_align="left"))
    if trace.steps:
        parts += [_step(step) for step in trace.steps]
    else:
        parts += [_message(m) for m in trace.messages if m is not problem and m.role != "system"]
    parts += [_tests(trace), _metrics(trace)]
    if trace.error is not None:
        message = f"{trace.error.kind}/{trace.error.reason}: {trace.error.message}"
        parts.append(Panel(Text(message), title="episode failed", border_style="red"))
    return Group(*(p for p in parts if p is not None))


def _candidates(path: Path, only_failed: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, obj in iter_lines(path):
        if not only_failed or obj.get("success") is not True:
            yield lineno, obj


def find_trace(
    path: Path, *, index: int | None = None, trace_id: str | None = None, only_failed: bool = False
) -> Trace:
    """The trace with ``trace_id``, or at ``index`` (0-based; failures only if ``only_failed``)."""
    if index is not None and trace_id is not None:
        raise ConfigError("give --index or --id, not both")
    if index is not None and index < 0:
        raise ConfigError(f"--index: expected 0 or more, got {index}")
    which = "failed trace" if only_failed else "trace"
    seen = 0
    for lineno, obj in _candidates(path, only_failed):
        if trace_id is not None and obj.get("id") != trace_id:
            continue
        if trace_id is None and seen < (index or 0):
            seen += 1
            continue
        return validate(obj, Trace, path, lineno)
    if trace_id is not None:
        raise InputFileError(f"{path}: no {which} with id {trace_id!r}")
    raise InputFileError(f"{path}: no {which} at index {index or 0} ({seen} in the file)")


def show_command(
    *, file: Path, index: int | None = None, trace_id: str | None = None, only_failed: bool = False
) -> None:
    """Print one trace of ``file``; plain text when stdout is not a terminal."""
    trace = find_trace(file, index=index, trace_id=trace_id, only_failed=only_failed)
    Console(highlight=False).print(render_trace(trace))
