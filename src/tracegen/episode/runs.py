"""The executions of one episode: code run in the sandbox, within ``max_iterations``; each
distinct program's verdict is kept, so the final grading does not run it twice."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from tracegen.episode.limits import limit_reached
from tracegen.grading.programs import ProgramJudge, judge_for
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import ExecResult, Language, Metrics, Problem


class Runs:
    """Runs code for the model (counted against the budget) and for grading (not counted)."""

    def __init__(
        self,
        problem: Problem,
        sandbox: CodeRunner,
        metrics: Metrics,
        max_iterations: int,
        language_of: Callable[[str], Language | None] = lambda code: None,
    ) -> None:
        self.problem = problem
        self.language_of = language_of
        """A program's language as the model's fence named it (else the problem's, or its code
        says: `tracegen.grading.programs.ProgramJudge.judge`)."""
        self.sandbox = sandbox
        self.metrics = metrics
        self.max_iterations = max_iterations
        self.tested = problem.kind == "code"
        self.executed: list[str] = []
        self._verdicts: dict[str, ExecResult] = {}

    async def run_tests(self, code: str) -> ExecResult:
        """The verdict: every test, private ones included."""
        if code not in self._verdicts:
            self._verdicts[code] = await self._timed(self._judged(code, public_only=False))
        return self._verdicts[code]

    async def _judged(self, code: str, *, public_only: bool) -> ExecResult:
        if not self.problem.is_program:
            return await self.sandbox.run_tests(code, self.problem)
        judge = judge_for(self.sandbox)
        if judge is None:
            return ExecResult(status="error", error="this sandbox cannot run whole programs")
        tests = self.problem.public_tests if public_only else None
        if public_only and not tests:
            return await self.sandbox.run_code(code)
        if public_only:  # feedback shows every public test that fails
            judge = ProgramJudge(judge.programs, replace(judge.options, all_tests=True))
        return await judge.judge(self.problem, code, self.language_of(code), tests=tests)

    async def execute(
        self, code: str, *, script: bool = False, language: Language | None = None
    ) -> ExecResult:
        """Run code whose result goes back to the model: one of ``max_iterations``.

        Code problems run against their tests, math problems (and ``script``) as a script;
        a script in C++ or Java (``language``) is compiled and run once with empty stdin.
        """
        if self.metrics.executions >= self.max_iterations:
            raise limit_reached(
                "max_iterations", f"the episode used all {self.max_iterations} executions"
            )
        if script and language not in (None, "python"):
            assert language is not None
            result = await self._timed(self._compiled_script(code, language))
        elif self.tested and not script and self.problem.is_program:
            # The model is shown the public tests only: the private ones decide the verdict.
            result = await self._timed(self._judged(code, public_only=True))
        elif self.tested and not script:
            result = await self.run_tests(code)
        else:
            result = await self._timed(self.sandbox.run_code(code))
        self.executed.append(code)
        self.metrics.executions += 1
        self.metrics.exec_timeouts += result.status == "timeout"
        return result

    async def _compiled_script(self, code: str, language: Language) -> ExecResult:
        judge = judge_for(self.sandbox)
        if judge is None:
            return ExecResult(status="error", error="this sandbox cannot run whole programs")
        return await judge.run_script(self.problem, code, language)

    @property
    def last(self) -> int:
        """The index of the last execution (what a step's ``exec_index`` points to)."""
        return self.metrics.executions - 1

    def require_iteration(self) -> None:
        """End the episode now if no execution is left for another attempt."""
        if self.metrics.executions >= self.max_iterations:
            raise limit_reached(
                "max_iterations",
                f"the tests still fail after {self.max_iterations} executions",
            )

    async def _timed(self, call: Awaitable[ExecResult]) -> ExecResult:
        started = time.perf_counter()
        result = await call
        self.metrics.execution_s += time.perf_counter() - started
        return result
