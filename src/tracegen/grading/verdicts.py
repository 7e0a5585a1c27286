"""Solutions checked against their problems' tests in the sandbox (`tracegen verify`).

A solutions file holds rows with ``problem_id`` and ``code`` (math problems may give
``answer`` instead); a trace file works too, its ``final_code`` / ``final_answer`` used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from tracegen.errors import InputFileError
from tracegen.grading.answers import extract_final_answer, grade_answer
from tracegen.grading.programs import ProgramJudge
from tracegen.jsonl import iter_lines
from tracegen.sandbox.base import CodeRunner
from tracegen.sandbox.programs import guess_language
from tracegen.schema import (
    LANGUAGES,
    TRACE_SCHEMA,
    ExecResult,
    ExecStatus,
    Language,
    Outcome,
    Problem,
    Record,
    TestResult,
)

VERDICT_SCHEMA: Final = "tracegen.verdict/1"


class Verdict(Record):
    """The outcome of one solution: its status and per-test results."""

    schema_: Literal["tracegen.verdict/1"] = Field(default=VERDICT_SCHEMA, alias="schema")
    problem_id: str
    line: int
    trace_id: str | None = None
    status: ExecStatus
    outcome: Outcome | None = None
    """Program problems: ``accepted`` or the first failing test's outcome."""
    language: Language | None = None
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
    language: Language | None = None


LANGUAGE_NAMES: Final[dict[str, Language]] = {
    "python": "python",
    "python3": "python",
    "py": "python",
    "cpp": "cpp",
    "c++": "cpp",
    "cxx": "cpp",
    "c++17": "cpp",
    "java": "java",
}
"""Names a solution row (or a code fence) may give its language by."""


def _string(row: dict[str, Any], key: str, where: str) -> str | None:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise InputFileError(f"{where}: {key!r} must be a string")
    return value


def iter_solutions(path: Path, problems: dict[str, Problem], source: str) -> Iterator[Solution]:
    """The solutions of ``path``, read lazily; a bad line raises `InputFileError` naming it."""
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
        language = _string(row, "language", where)
        if language is not None:
            language = LANGUAGE_NAMES.get(language.strip().lower())
            if language is None:
                names = ", ".join(LANGUAGES)
                raise InputFileError(f"{where}: 'language' must be one of {names}")
        yield Solution(lineno, problem, code, answer, trace_id, language)


def check_solutions(path: Path, problems: dict[str, Problem], source: str) -> int:
    """How many solutions ``path`` holds, every line checked before anything runs; memory
    stays flat whatever the size of the file."""
    count = sum(1 for _ in iter_solutions(path, problems, source))
    if not count:
        raise InputFileError(f"{path}: holds no solutions")
    return count


def _verdict(solution: Solution, result: ExecResult) -> Verdict:
    return Verdict(
        problem_id=solution.problem.id,
        line=solution.line,
        trace_id=solution.trace_id,
        status=result.status,
        outcome=result.outcome,
        language=solution.language
        or solution.problem.language
        or guess_language(solution.code or "")
        if solution.problem.is_program
        else None,
        passed=result.passed,
        total=len(solution.problem.tests),
        tests=result.tests,
        error=result.error,
        duration_s=result.duration_s,
    )


async def check_answer(solution: Solution, sandbox: CodeRunner) -> ExecResult:
    """A math problem: grade the given answer, or the one the code prints."""
    answer, run = solution.answer, None
    if answer is None and solution.code is not None:
        run = await sandbox.run_code(solution.code)
        if run.status != "ok":
            return run
        answer = extract_final_answer(run.stdout)
    graded = grade_answer(solution.problem, answer)
    if run is None:
        return graded
    return graded.model_copy(
        update={"exit_code": run.exit_code, "stdout": run.stdout, "duration_s": run.duration_s}
    )


async def verify_one(
    solution: Solution, sandbox: CodeRunner, judge: ProgramJudge | None = None
) -> Verdict:
    """Run one solution; a trace without final code is an ``error`` verdict. Program
    problems need ``judge``."""
    if solution.problem.kind == "math":
        result = await check_answer(solution, sandbox)
    elif solution.code is None:
        result = ExecResult(status="error", error="the trace has no final code")
    elif solution.problem.is_program:
        if judge is None:
            raise ValueError("program problems are judged by a ProgramJudge")
        result = await judge.judge(solution.problem, solution.code, solution.language)
    else:
        result = await sandbox.run_tests(solution.code, solution.problem)
    return _verdict(solution, result)
