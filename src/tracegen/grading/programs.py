"""The judge of program problems: each ``stdio``/``functional`` test run as its own execution.

A program is built once (`tracegen.sandbox.programs`), then run per test under the
problem's limits scaled by ``time_scale``; each test gets a named outcome (`Outcome`):
``accepted``, ``wrong``, ``time``, ``memory``, ``runtime``, ``compile``, ``output-limit``,
or ``error`` when the sandbox or tracegen failed (never counted as the program's wrong
answer). Judging stops at the first failing test (the rest are ``skipped``) unless
``all_tests`` is asked for, as partial-credit rewards need: then ``score`` is the fraction of
tests passed.
"""

from __future__ import annotations

import math
import re
import signal
import weakref
from dataclasses import dataclass
from typing import Final

import orjson

from tracegen.grading.compare import outputs_match
from tracegen.sandbox._wire import short_repr, values_equal
from tracegen.sandbox.programs import (
    RESULT_MARKER,
    Built,
    Limits,
    Programs,
    compiler_missing,
    guess_language,
)
from tracegen.sandbox.runner import ProcessRun
from tracegen.schema import (
    Comparison,
    ExecResult,
    ExecStatus,
    Language,
    Outcome,
    Problem,
    ProgramLimits,
    TestCase,
    TestResult,
)

OUTPUT_LIMIT: Final = 16 << 20
"""Bytes a program may write per test (stdout, and stderr) before it is stopped."""
SHOWN: Final = 2000
"""Characters of expected and actual output a test result keeps."""
CPU_KILLED: Final = 0.5
"""A run killed by SIGKILL having used this share of its CPU limit ran out of time."""
CHECKER_LIMITS: Final = Limits(cpu_s=10, wall_s=20, memory_mb=1024, output_bytes=1 << 16)
_STATUS: Final[dict[Outcome, ExecStatus]] = {
    "accepted": "ok",
    "wrong": "failed",
    "time": "timeout",
    "memory": "memory",
    "runtime": "runtime",
    "compile": "compile",
    "output-limit": "output-limit",
    "error": "error",
    "skipped": "failed",
}
_SIGNALS: Final = {int(s): s.name for s in signal.Signals}
_FRAME: Final = re.compile(r"\s+(?:at .*|\.\.\. \d+ more)$")


@dataclass(frozen=True)
class JudgeOptions:
    """``time_scale`` multiplies every problem's time limit; ``all_tests`` runs every test
    instead of stopping at the first failure."""

    time_scale: float = 1.0
    all_tests: bool = False
    output_bytes: int = OUTPUT_LIMIT
    batch: bool = False
    """Run a program's stdin tests in one execution (`Programs.run_batch`; any test whose
    run there did not end well is run again alone) instead of one execution per test. Off
    by default: the tests of one batch share a working directory and the processes a test
    leaves behind, so one test's run can change the next one's verdict."""


def _limits(problem: Problem, options: JudgeOptions) -> Limits:
    declared = problem.limits or ProgramLimits()
    cpu = declared.time_s * options.time_scale
    return Limits(
        cpu_s=cpu,
        wall_s=3 * cpu + 2,
        memory_mb=declared.memory_mb,
        output_bytes=options.output_bytes,
    )


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def _last_line(text: str) -> str:
    """The last line of an error that says what happened (not a Java stack frame)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not _FRAME.match(ln)]
    return lines[-1][:300] if lines else ""


def _failure(run: ProcessRun, limits: Limits, *, private: bool) -> tuple[Outcome, str] | None:
    """The outcome of a run that did not end well, and why; None if it exited 0 in time."""
    if run.killed_for == "error":
        return "error", "the sandbox failed during the run"
    cpu_limit = math.ceil(limits.cpu_s)
    if run.killed_for == "timeout":
        return "time", f"wall-clock limit of {limits.wall_s:g} s exceeded"
    if run.killed_for == "memory":
        return "memory", f"memory limit of {limits.memory_mb} MB exceeded (all processes)"
    # The CPU limit ends a program with SIGKILL (a SIGXCPU could be caught, and answered
    # from); the kernel counts its CPU time a little ahead of what its rusage reports.
    if (
        run.cpu_s > limits.cpu_s
        or run.signal == signal.SIGXCPU
        or (run.signal == signal.SIGKILL and run.cpu_s >= CPU_KILLED * cpu_limit)
    ):
        return "time", f"CPU time limit of {limits.cpu_s:g} s exceeded ({run.cpu_s:.2f} s)"
    if run.killed_for == "output-limit":
        return "output-limit", f"more than {limits.output_bytes} bytes of output"
    stderr = run.stderr.decode(errors="replace")
    if run.signal is None and run.exit_code == 0:
        return None
    if (
        "std::bad_alloc" in stderr
        or _last_line(stderr).startswith("MemoryError")
        or "java.lang.OutOfMemoryError: Java heap space" in stderr
    ):
        return "memory", f"memory limit of {limits.memory_mb} MB exceeded"
    if run.signal is not None:
        return "runtime", f"killed by {_SIGNALS.get(run.signal, f'signal {run.signal}')}"
    detail = "" if private else _last_line(stderr)  # a private test's input may be echoed
    return "runtime", f"exit status {run.exit_code}" + (f": {detail}" if detail else "")


_JUDGES: weakref.WeakKeyDictionary[object, ProgramJudge] = weakref.WeakKeyDictionary()


def judge_for(runner: object) -> ProgramJudge | None:
    """The judge of programs run by ``runner`` (one per sandbox, so built programs are
    shared); None if it cannot run programs. A wrapper (``.runner``) is looked through."""
    while not hasattr(runner, "run_process") and hasattr(runner, "runner"):
        runner = runner.runner
    if not hasattr(runner, "run_process") or not hasattr(runner, "limits"):
        return None
    judge = _JUDGES.get(runner)
    if judge is None:
        judge = _JUDGES[runner] = ProgramJudge(Programs.cached_on_disk(runner))
    return judge


class ProgramJudge:
    """Judges programs with one `Programs` (so built programs are shared across calls)."""

    def __init__(self, programs: Programs, options: JudgeOptions | None = None) -> None:
        self.programs = programs
        self.options = options or JudgeOptions()

    async def judge(
        self,
        problem: Problem,
        code: str,
        language: Language | None = None,
        tests: list[TestCase] | None = None,
    ) -> ExecResult:
        """Run ``code`` against ``tests`` (default: all of the problem's)."""
        tests = problem.tests if tests is None else tests
        language = language or problem.language or guess_language(code)
        if (missing := compiler_missing(language)) is not None:
            return _whole(tests, "error", f"cannot run {language}: {missing}")
        if language != "python" and any(t.kind == "functional" for t in tests):
            return _whole(tests, "error", "functional tests call a Python entry point")
        if problem.setup and language == "python":
            code = f"{problem.setup}\n{code}"
        built = await self.programs.build(code, language)
        if built.failure is not None:
            return _whole(tests, "error", built.failure)
        if built.error is not None:
            return _whole(tests, "compile", _clip(built.error))
        compare = problem.compare or Comparison()
        checker = None
        if compare.rule == "checker" and compare.checker is not None:
            checker = await self.programs.build(compare.checker, compare.checker_language)
            if checker.failure is not None or checker.error is not None:
                why = checker.failure or f"the checker does not compile: {checker.error}"
                return _whole(tests, "error", _clip(why))
        limits = _limits(problem, self.options)
        batched = await self._batch(problem, built, tests, limits)
        results: list[TestResult] = []
        first: tuple[TestResult, ProcessRun] | None = None
        for i, test in enumerate(tests):
            if first is not None and not self.options.all_tests:
                results.append(_result(test, "skipped", "not run: an earlier test failed"))
                continue
            ran = batched[i] if i < len(batched) else None
            result, test_run = await self._one(problem, built, checker, compare, test, limits, ran)
            results.append(result)
            if first is None and result.outcome != "accepted":
                first = (result, test_run)
        if first is None:
            return ExecResult(status="ok", outcome="accepted", tests=results)
        failed, run = first
        outcome: Outcome = failed.outcome or "error"
        error = failed.error
        if outcome == "wrong":
            error = "wrong answer" + (f" ({compare.rule})" if compare.rule != "checker" else "")
        # A sandbox failure anywhere outranks the program's own: the verdict is not its.
        if any(r.outcome == "error" for r in results):
            outcome, error = "error", next(r.error for r in results if r.outcome == "error")
        return ExecResult(
            status=_STATUS[outcome],
            outcome=outcome,
            tests=results,
            error=error,
            exit_code=run.exit_code,
            # What a private test's run printed may hold its input: left out.
            stderr="" if failed.private else _clip(run.stderr.decode(errors="replace")),
            duration_s=round(run.wall_s, 6),
        )

    async def run_script(self, problem: Problem, code: str, language: Language) -> ExecResult:
        """Run ``code`` once with nothing on stdin, under ``problem``'s limits (a tool call
        in C++ or Java): its output, and how it ended; no test is judged."""
        if (missing := compiler_missing(language)) is not None:
            return ExecResult(status="error", error=f"cannot run {language}: {missing}")
        built = await self.programs.build(code, language)
        if built.failure is not None:
            return ExecResult(status="error", error=built.failure)
        if built.error is not None:
            return ExecResult(status="compile", outcome="compile", error=_clip(built.error))
        limits = _limits(problem, self.options)
        run = await self.programs.run(built, stdin=b"", limits=limits)
        failed = _failure(run, limits, private=False)
        return ExecResult(
            status="ok" if failed is None else _STATUS[failed[0]],
            outcome=None if failed is None else failed[0],
            error=None if failed is None else failed[1],
            exit_code=run.exit_code,
            stdout=run.stdout.decode(errors="replace"),
            stderr=run.stderr.decode(errors="replace"),
            duration_s=round(run.wall_s, 6),
        )

    async def _batch(
        self, problem: Problem, built: Built, tests: list[TestCase], limits: Limits
    ) -> list[ProcessRun]:
        """The runs of ``tests`` made in one execution, where that applies (stdin tests,
        no named files, two or more); the clean ones stand, the others are run again."""
        if (
            not self.options.batch
            or len(tests) < 2
            or problem.input_file
            or problem.output_file
            or any(t.kind != "stdio" for t in tests)
        ):
            return []
        inputs = [(t.input or "").encode() for t in tests]
        room = self.programs.file_bytes
        if room is not None and max(map(len, inputs)) + len(built.binary or b"") > room:
            return []
        longest = max(len(str(t.expected)) for t in tests)
        cap = min(self.options.output_bytes, max(1 << 16, 2 * longest + 4096))
        runs: list[ProcessRun] = []
        for chunk in _chunks(inputs):
            done = await self.programs.run_batch(built, chunk, limits, cap)
            runs += done
            if len(done) < len(chunk):  # it ended early: the rest are run alone
                break
        return runs

    async def _one(
        self,
        problem: Problem,
        built: Built,
        checker: Built | None,
        compare: Comparison,
        test: TestCase,
        limits: Limits,
        ran: ProcessRun | None = None,
    ) -> tuple[TestResult, ProcessRun]:
        call = None
        stdin = b""
        if test.kind == "functional":
            call = (problem.entry_point or "", list(test.args))
        else:
            stdin = (test.input or "").encode()
        room = self.programs.file_bytes
        if room is not None and len(stdin) + len(built.binary or b"") > room:
            error = f"the test's input does not fit the sandbox's file size limit ({room} bytes)"
            return _result(test, "error", error), ProcessRun(
                None, None, 0.0, 0.0, b"", b"", "error"
            )
        clean = (
            ran is not None
            and ran.exit_code == 0
            and ran.signal is None
            and ran.killed_for is None
            and ran.cpu_s <= limits.cpu_s
        )
        if clean:
            assert ran is not None
            run = ran
        else:  # not run in the batch, or its run there did not end well: alone, as always
            run = await self.programs.run(
                built,
                stdin=stdin,
                limits=limits,
                input_file=problem.input_file if call is None else None,
                output_file=problem.output_file if call is None else None,
                call=call,
            )
        failed = _failure(run, limits, private=test.private)
        # A JVM that does not start here at all (it says so, or is killed starting) is ours
        # to fix, never the program's fault: asked once per memory limit, of `java -version`.
        if (
            failed is not None
            and failed[0] in ("runtime", "memory", "time")
            and built.language == "java"
            and not await self.programs.jvm_starts(limits)
        ):
            failed = "error", "the JVM cannot start under the sandbox's limits"
        if failed is not None:
            return _result(test, failed[0], failed[1], run), run
        stdout = run.stdout.decode(errors="replace")
        if test.kind == "functional":
            return _functional(test, run, compare), run
        expected = str(test.expected)
        if checker is not None:
            outcome, why = await self._check(checker, compare, test.input or "", expected, stdout)
        elif outputs_match(stdout, expected, compare):
            outcome, why = "accepted", None
        else:
            outcome, why = "wrong", None
        return _result(test, outcome, why, run, actual=stdout), run

    async def _check(
        self, checker: Built, compare: Comparison, given: str, expected: str, actual: str
    ) -> tuple[Outcome, str | None]:
        files = (
            ("input.txt", given.encode()),
            ("correct_output.txt", expected.encode()),
            ("solution_output.txt", actual.encode()),
        )
        if compare.checker_protocol == "testlib":
            argv = ("input.txt", "solution_output.txt", "correct_output.txt")
        else:
            argv = ("input.txt", "correct_output.txt", "solution_output.txt")
        run = await self.programs.run(
            checker, stdin=b"", limits=CHECKER_LIMITS, argv=argv, extra_files=files
        )
        if run.killed_for is not None or run.signal is not None:
            return "error", "the checker failed: " + (run.killed_for or f"signal {run.signal}")
        said = run.stdout.decode(errors="replace").split()
        if compare.checker_protocol == "testlib":
            if run.exit_code == 0:
                return "accepted", None
            if run.exit_code in (1, 2):
                return "wrong", None
            return "error", f"the checker failed (exit status {run.exit_code})"
        if run.exit_code == 0 and said and said[-1] == "1":
            return "accepted", None
        return "wrong", None


BATCH_BYTES: Final = 4 << 20
"""At most this much input (and `BATCH_TESTS` tests) goes into one execution."""
BATCH_TESTS: Final = 100


def _chunks(inputs: list[bytes]) -> list[list[bytes]]:
    chunks: list[list[bytes]] = [[]]
    size = 0
    for data in inputs:
        if chunks[-1] and (size + len(data) > BATCH_BYTES or len(chunks[-1]) >= BATCH_TESTS):
            chunks.append([])
            size = 0
        chunks[-1].append(data)
        size += len(data)
    return chunks


def _functional(test: TestCase, run: ProcessRun, compare: Comparison) -> TestResult:
    _, marker, value = run.stdout.rpartition(b"\n" + RESULT_MARKER)
    if not marker:
        return _result(test, "runtime", "the entry point returned no value", run)
    try:
        got = orjson.loads(value)
    except orjson.JSONDecodeError:
        return _result(test, "wrong", "the value returned is not JSON", run)
    expected = test.expected
    # On LiveCodeBench's rows, its grader's `prediction == expected`, as Python sees it.
    ok = bool(got == expected) if compare.rule == "lines" else values_equal(got, expected)
    if not ok and compare.unwrap_single and isinstance(expected, list) and len(expected) == 1:
        ok = values_equal(got, expected[0])
    outcome: Outcome = "accepted" if ok else "wrong"
    return _result(test, outcome, None, run, actual=short_repr(got))


def _result(
    test: TestCase,
    outcome: Outcome,
    error: str | None,
    run: ProcessRun | None = None,
    actual: str | None = None,
) -> TestResult:
    expected = None
    if not test.private:
        expected = test.expected if isinstance(test.expected, str) else short_repr(test.expected)
        expected = _clip(expected)
    return TestResult(
        name=test.name,
        passed=outcome == "accepted",
        expected=expected,
        actual=None if actual is None or test.private else _clip(actual),
        error=error,
        outcome=outcome,
        private=test.private,
        cpu_s=round(run.cpu_s, 6) if run is not None else None,
    )


def _whole(tests: list[TestCase], outcome: Outcome, error: str) -> ExecResult:
    """Every test with one outcome: the program never ran (compile error, no compiler)."""
    return ExecResult(
        status=_STATUS[outcome],
        outcome=outcome,
        error=error,
        tests=[_result(t, outcome, error) for t in tests],
    )
