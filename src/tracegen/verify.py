"""`tracegen verify`: run solutions against their problems' tests in the sandbox.

A solutions file holds rows with ``problem_id`` and ``code`` (math problems may give
``answer`` instead); a trace file works too, its ``final_code`` / ``final_answer`` used.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import Field
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.jsonl import JsonlWriter, dumps, iter_lines
from tracegen.problems import load_problems
from tracegen.problems.math import answers_match, extract_final_answer
from tracegen.sandbox.base import CodeRunner, IsolationChoice
from tracegen.schema import TRACE_SCHEMA, ExecResult, ExecStatus, Problem, Record, TestResult

VERDICT_SCHEMA = "tracegen.verdict/1"
_DETAIL_WIDTH = 60
_STATUS_STYLE = {"ok": "green", "failed": "red", "error": "red", "timeout": "yellow"}


class Verdict(Record):
    """The outcome of one solution: its status and per-test results."""

    schema_: Literal["tracegen.verdict/1"] = Field(default=VERDICT_SCHEMA, alias="schema")
    problem_id: str
    line: int
    trace_id: str | None = None
    status: ExecStatus
    passed: int
    total: int
    tests: list[TestResult] = Field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class Solution:
    line: int
    problem: Problem
    code: str | None
    answer: str | None
    trace_id: str | None


def _string(row: dict[str, Any], key: str, where: str) -> str | None:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise InputFileError(f"{where}: {key!r} must be a string")
    return value


def read_solutions(path: Path, problems: dict[str, Problem], source: str) -> list[Solution]:
    """Every solution of ``path``, checked against the problem set before anything runs."""
    solutions = []
    for lineno, row in iter_lines(path):
        where = f"{path}:{lineno}"
        is_trace = row.get("schema") == TRACE_SCHEMA
        problem_id = _string(row, "problem_id", where)
        if not problem_id:
            raise InputFileError(f"{where}: missing 'problem_id'")
        if problem_id not in problems:
            raise InputFileError(f"{where}: unknown problem_id {problem_id!r} (not in {source})")
        code = _string(row, "final_code" if is_trace else "code", where)
        answer = _string(row, "final_answer" if is_trace else "answer", where)
        problem = problems[problem_id]
        if not is_trace and code is None and (answer is None or problem.kind == "code"):
            raise InputFileError(f"{where}: missing 'code'")
        trace_id = _string(row, "id", where) if is_trace else None
        solutions.append(Solution(lineno, problem, code, answer, trace_id))
    if not solutions:
        raise InputFileError(f"{path}: holds no solutions")
    return solutions


def _verdict(solution: Solution, result: ExecResult) -> Verdict:
    return Verdict(
        problem_id=solution.problem.id,
        line=solution.line,
        trace_id=solution.trace_id,
        status=result.status,
        passed=result.passed,
        total=len(solution.problem.tests),
        tests=result.tests,
        error=result.error,
        duration_s=result.duration_s,
    )


async def _check_answer(solution: Solution, sandbox: CodeRunner) -> ExecResult:
    """A math problem: compare the given answer, or the one the code prints, by value."""
    expected = str(solution.problem.tests[0].expected)
    answer, run = solution.answer, None
    if answer is None and solution.code is not None:
        run = await sandbox.run_code(solution.code)
        if run.status != "ok":
            return run
        answer = extract_final_answer(run.stdout)
    passed = answer is not None and answers_match(answer, expected)
    test = TestResult(name="answer", passed=passed, expected=expected, actual=answer)
    return ExecResult(
        status="ok" if passed else "failed",
        exit_code=run.exit_code if run else None,
        stdout=run.stdout if run else "",
        duration_s=run.duration_s if run else 0.0,
        tests=[test],
    )


async def verify_one(solution: Solution, sandbox: CodeRunner) -> Verdict:
    """Run one solution; a trace without final code is an ``error`` verdict."""
    if solution.problem.kind == "math":
        result = await _check_answer(solution, sandbox)
    elif solution.code is None:
        result = ExecResult(status="error", error="the trace has no final code")
    else:
        result = await sandbox.run_tests(solution.code, solution.problem)
    return _verdict(solution, result)


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
        raise ConfigError(f"--sandbox must be auto, bwrap, builtin or rlimit, not {sandbox!r}")
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
