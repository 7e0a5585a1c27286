"""`tracegen verify`: every solution of a file run in the sandbox, shown as a table."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import cast, get_args

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from tracegen.errors import ConfigError, OutputError
from tracegen.grading.verify import Solution, Verdict, read_solutions, verify_one
from tracegen.jsonl import JsonlWriter, dumps
from tracegen.problems import load_problems
from tracegen.sandbox.base import IsolationChoice

_DETAIL_WIDTH = 60
_STATUS_STYLE = {"ok": "green", "failed": "red", "error": "red", "timeout": "yellow"}


async def _verify_all(
    solutions: list[Solution], isolation: IsolationChoice, stderr: Console
) -> list[Verdict]:
    from tracegen.sandbox import Sandbox

    async with Sandbox(isolation=isolation) as sandbox:
        if sandbox.warning:
            stderr.print(f"[yellow]warning:[/] {sandbox.warning}")
        with Progress(console=stderr, transient=True) as progress:
            task = progress.add_task("verifying", total=len(solutions))

            async def one(solution: Solution) -> Verdict:
                verdict = await verify_one(solution, sandbox)
                progress.advance(task)
                return verdict

            return list(await asyncio.gather(*(one(s) for s in solutions)))


def _detail(verdict: Verdict) -> str:
    """The first line of the error, or of the first failing test's error (or its name)."""
    failure = next((t for t in verdict.tests if not t.passed), None)
    text = verdict.error or (failure and (failure.error or failure.name)) or ""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _DETAIL_WIDTH else line[: _DETAIL_WIDTH - 1] + "…"


def _table(verdicts: list[Verdict]) -> Table:
    table = Table()
    table.add_column("problem", style="bold")
    table.add_column("passed", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail")
    for v in verdicts:
        style = _STATUS_STYLE.get(v.status, "magenta")
        table.add_row(v.problem_id, f"{v.passed}/{v.total}", f"[{style}]{v.status}[/]", _detail(v))
    return table


def _summary(verdicts: list[Verdict]) -> str:
    """``"3 solutions: 2 passed, 1 failed (failed 1)"``: statuses other than ok counted."""
    ok = sum(v.status == "ok" for v in verdicts)
    others = Counter(v.status for v in verdicts if v.status != "ok")
    line = f"{len(verdicts)} solutions: {ok} passed, {len(verdicts) - ok} failed"
    if others:
        line += " (" + ", ".join(f"{status} {n}" for status, n in others.most_common()) + ")"
    return line


def verify_command(
    *, solutions: Path, problems: str, output: Path | None, json_out: bool, sandbox: str
) -> None:
    """Verify every solution of ``solutions``; failing solutions are results, not errors."""
    if sandbox not in get_args(IsolationChoice):
        raise ConfigError(f"--sandbox must be auto, bwrap or rlimit, not {sandbox!r}")
    by_id = {p.id: p for p in load_problems(problems)}
    todo = read_solutions(solutions, by_id, problems)
    stdout, stderr = Console(), Console(stderr=True)
    verdicts = asyncio.run(_verify_all(todo, cast(IsolationChoice, sandbox), stderr))
    if output is not None:
        try:
            output.unlink(missing_ok=True)
        except OSError as e:
            raise OutputError(f"{output}: cannot replace it: {e.strerror}") from None
        with JsonlWriter(output) as writer:
            for verdict in verdicts:
                writer.write(verdict)
    if json_out:
        for verdict in verdicts:
            sys.stdout.buffer.write(dumps(verdict))
        sys.stdout.buffer.flush()
        return
    stdout.print(_table(verdicts))
    stdout.print(_summary(verdicts))
