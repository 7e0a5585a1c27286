"""`tracegen verify`: every solution of a file run in the sandbox, verdicts streamed.

The file is read twice: once to check every line (a bad one is an error naming FILE:LINE
before anything runs), then lazily while the solutions run (`tracegen.generate.verify`, at
most `IN_FLIGHT` per sandbox worker at a time). Each verdict comes out in file order as
soon as those before it are done: a row on the terminal, a line with ``--json`` or in
``-o``. Memory stays flat however many solutions the file holds.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.text import Text

from tracegen.config import RunSettings, load_settings
from tracegen.errors import ConfigError, OutputError
from tracegen.generate.verify import verify_stream
from tracegen.grading.programs import JudgeOptions
from tracegen.grading.verdicts import Verdict, check_solutions, iter_solutions
from tracegen.jsonl import JsonlWriter, check_outputs, dumps, special_file_warning
from tracegen.problems import load_problems
from tracegen.terminal import console, json_bytes, printable

_ID_WIDTH = 40
_DETAIL_WIDTH = 60
_STATUS_WIDTH = len("output-limit")
_STATUS_STYLE = {"ok": "green", "failed": "red", "error": "red", "timeout": "yellow"}

Emit = Callable[[Verdict], None]


def _detail(verdict: Verdict) -> str:
    """The first line of the error, or of the first failing test's error (or its name)."""
    failure = next((t for t in verdict.tests if not t.passed), None)
    text = verdict.error or (failure and (failure.error or failure.name)) or ""
    line = text.splitlines()[0] if text else ""
    return _fit(line, _DETAIL_WIDTH)


def _fit(text: str, width: int) -> str:
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Rows:
    """Verdicts as aligned rows (problem, passed, status, detail), printed as they come."""

    def __init__(self, console: Console, problem_ids: Iterator[str]) -> None:
        self.console = console
        self.width = min(_ID_WIDTH, max((len(i) for i in problem_ids), default=7))

    def header(self) -> None:
        columns = ("problem".ljust(self.width), " passed", "status".ljust(_STATUS_WIDTH), "detail")
        self.console.print(Text("  ".join(columns), style="bold"), soft_wrap=True)

    def add(self, v: Verdict) -> None:
        row = Text.assemble(
            (_fit(v.problem_id, self.width).ljust(self.width), "bold"),
            "  ",
            f"{v.passed}/{v.total}".rjust(7),
            "  ",
            (v.status.ljust(_STATUS_WIDTH), _STATUS_STYLE.get(v.status, "magenta")),
            "  ",
            _detail(v),
        )
        self.console.print(row, soft_wrap=True)


class _Tally:
    """Counts of statuses, for the closing line."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()

    def add(self, verdict: Verdict) -> None:
        self.statuses[verdict.status] += 1

    def summary(self) -> str:
        """``"3 solutions: 2 passed, 1 failed (failed 1)"``: statuses other than ok counted."""
        total = sum(self.statuses.values())
        ok = self.statuses["ok"]
        line = f"{total} solutions: {ok} passed, {total - ok} failed"
        others = [(s, n) for s, n in self.statuses.most_common() if s != "ok"]
        if others:
            line += " (" + ", ".join(f"{status} {n}" for status, n in others) + ")"
        return line


def _open_output(output: Path, warn: Callable[[str], None]) -> JsonlWriter:
    """A writer replacing ``output``; a FIFO or a device is written as it is, with a warning."""
    warning = special_file_warning(output)
    if warning is not None:
        warn(warning)
    else:
        try:
            output.unlink(missing_ok=True)
        except OSError as e:
            raise OutputError(f"{output}: cannot replace it: {e.strerror}") from None
    return JsonlWriter(output)


def verify_command(
    *,
    solutions: Path,
    problems: str,
    output: Path | None,
    json_out: bool,
    sandbox: str,
    packages: bool = False,
    time_scale: float = 1.0,
    all_tests: bool = False,
) -> None:
    """Verify every solution of ``solutions``; failing solutions are results, not errors."""
    load_settings(RunSettings, {"sandbox": sandbox}, env={})  # refused as `run` refuses it
    if not 0 < time_scale <= 100:
        raise ConfigError(f"--time-scale must be within (0, 100], got {time_scale}")
    options = JudgeOptions(time_scale=time_scale, all_tests=all_tests)
    by_id = {p.id: p for p in load_problems(problems)}
    check_solutions(solutions, by_id, problems)
    stdout, stderr = console(), console(stderr=True, highlight=False)

    def warn(message: str) -> None:
        stderr.print(f"tracegen: warning: {message}", markup=False, soft_wrap=True)

    problem_file = [Path(problems)] if Path(problems).is_file() else []
    check_outputs([solutions, *problem_file], output)
    writer = _open_output(output, warn) if output is not None else None
    tally = _Tally()
    rows = None if json_out else _Rows(stdout, iter(by_id))
    if rows is not None:
        rows.header()

    def emit(verdict: Verdict) -> None:
        tally.add(verdict)
        if writer is not None:
            writer.write(verdict)
        if rows is not None:
            rows.add(verdict)
        else:
            sys.stdout.buffer.write(json_bytes(dumps(verdict)))
            sys.stdout.buffer.flush()

    todo = iter_solutions(solutions, by_id, problems)
    try:
        asyncio.run(verify_stream(todo, sandbox, warn, emit, options, packages))
    finally:
        if writer is not None:
            writer.close()
    if rows is not None:
        stdout.print(tally.summary(), markup=False)
