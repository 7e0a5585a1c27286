"""`TracegenEnvironment`: a TRL ``environment_factory`` environment on tracegen's sandbox.

TRL's contract (``trl/trainer/grpo_trainer.py``, trl 1.16.0): instances are pooled and reused
("construct once, reset often"); ``reset(**row)`` gets the dataset row; every other public
method is a tool, its schema made from its name, type hints and docstring; ``get_reward()``
(no argument) makes the environment own the reward (weight 1, logged under the class name).

The tool is the native-tools mode's ``python``: a script runs in tracegen's sandbox and its
answer is the JSON that mode sends back (status, exit code, stdout, stderr). The reward is
tracegen's (`tracegen.grading.reward`), on the final program: the last script run that
defines the problem's entry point (else the last script), judged as ``tracegen verify``
judges it (`tracegen.grading.verdicts`): run afresh against the problem's tests in the
sandbox, never in the trainer's process, whatever the scripts printed; a math problem's
answer is the one that program prints when run again. The sandbox is shared by every
instance of the process, on an event loop of its own (TRL calls tools from its own threads
and loops), each an `EpisodeWorker`'s (`tracegen.generate.worker`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tracegen.config import RunSettings
from tracegen.episode.feedback import tool_error_json, tool_json
from tracegen.generate.worker import EpisodeWorker
from tracegen.grading.answers import extract_final_answer
from tracegen.grading.programs import judge_for
from tracegen.grading.reward import rescore
from tracegen.grading.verdicts import Solution, check_answer
from tracegen.parsing.program import defines
from tracegen.schema import ExecResult, Metrics, Problem, Trace
from tracegen.trl.dataset import PROBLEM_COLUMN

T = TypeVar("T")
MODE = "native-tools"


class _SandboxLoop:
    """One event loop thread holding the process's sandboxes (one per isolation and limits)."""

    _lock = threading.Lock()
    _instance: _SandboxLoop | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="tracegen-sandbox", daemon=True
        )
        self.thread.start()
        self.workers: dict[tuple[str, float, bool], EpisodeWorker] = {}
        # Closed before the interpreter stops the thread pools the sandbox's shutdown uses
        # (``atexit`` runs after that; threading's own exit hooks run first, newest first).
        threading._register_atexit(self.close)  # type: ignore[attr-defined]

    @classmethod
    def shared(cls) -> _SandboxLoop:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    @classmethod
    def shut_down(cls) -> None:
        """Close the process's sandboxes and stop their thread; the next environment starts
        them again."""
        with cls._lock:
            instance, cls._instance = cls._instance, None
        if instance is not None:
            instance.close()
            instance.thread.join(timeout=30)

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(call, self.loop).result()

    async def worker(self, settings: RunSettings) -> EpisodeWorker:
        """The worker of ``settings``' isolation, execution time and packages, warm."""
        key = (settings.sandbox, settings.exec_timeout, settings.sandbox_packages)
        if key not in self.workers:
            self.workers[key] = await EpisodeWorker(settings).open()
        return self.workers[key]

    def close(self) -> None:
        async def close_all() -> None:
            for worker in self.workers.values():
                await worker.aclose()
            self.workers.clear()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)


def close_sandboxes() -> None:
    """Close the sandboxes the environments of this process share (they are closed at exit
    anyway): their processes end, and a later environment starts new ones."""
    _SandboxLoop.shut_down()


class TracegenEnvironment:
    """A problem, a sandbox to run scripts in, and tracegen's judge (module docstring).

    ``settings`` are ``tracegen run``'s: ``exec_timeout``, ``sandbox`` and ``max_iterations``
    (scripts an episode may run) apply. Give a configured one with ``functools.partial``.
    """

    def __init__(self, settings: RunSettings | None = None) -> None:
        self._settings = settings or RunSettings()
        self._loop = _SandboxLoop.shared()
        self._problem: Problem | None = None
        self._scripts: list[str] = []

    def reset(self, **row: Any) -> None:
        """Start an episode on the row's problem (its ``problem`` column, as
        `tracegen.trl.problems_dataset` makes it)."""
        if PROBLEM_COLUMN not in row:
            raise ValueError(
                f"the dataset row has no {PROBLEM_COLUMN!r} column: make the dataset with "
                "tracegen.trl.problems_dataset"
            )
        self._problem = Problem.model_validate_json(row[PROBLEM_COLUMN])
        self._scripts = []

    def python(self, code: str) -> str:
        """Run a Python script in a sandbox and return its status, stdout and stderr.
        Print what you want to see.

        Args:
            code: The script to run.
        """
        if len(self._scripts) >= self._settings.max_iterations:
            limit = self._settings.max_iterations
            return tool_error_json(f"no executions left: this episode ran all {limit} scripts")
        result = self._loop.run(self._run(code))
        self._scripts.append(code)
        return tool_json(result)

    async def _run(self, code: str) -> ExecResult:
        return await (await self._loop.worker(self._settings)).runner.run_code(code)

    async def _judge(self, problem: Problem, code: str) -> ExecResult:
        box = (await self._loop.worker(self._settings)).runner
        if problem.kind == "math":
            return await check_answer(Solution(0, problem, code, None, None), box)
        judge = judge_for(box) if problem.is_program else None
        if judge is not None:
            return await judge.judge(problem, code)
        return await box.run_tests(code, problem)

    def final_program(self) -> str | None:
        """The last script run that defines the entry point, else the last script run."""
        problem = self._problem
        entry = problem.entry_point if problem else None
        defining = [c for c in self._scripts if defines(c, entry)]
        scripts = defining or self._scripts
        return scripts[-1] if scripts else None

    def get_reward(self) -> float:
        """tracegen's reward of the episode: the final program judged by the problem's tests
        (a math problem: the answer it prints when run again)."""
        if self._problem is None:
            raise RuntimeError("get_reward before reset")
        return self.trace().reward

    def trace(self) -> Trace:
        """The episode as far as tracegen can see it, scored: verdict, score, reward."""
        problem = self._problem
        if problem is None:
            raise RuntimeError("trace before reset")
        code = self.final_program()
        verdict = self._loop.run(self._judge(problem, code)) if code is not None else None
        answer = None
        if verdict is not None and problem.kind == "math":
            answer = extract_final_answer(verdict.stdout)
        n = len(self._scripts)
        trace = Trace(
            id=f"trl-{problem.id}",
            problem_id=problem.id,
            mode=MODE,
            model="trl",
            final_code=code,
            final_answer=answer,
            verdict=verdict,
            metrics=Metrics(executions=n, tool_calls=n),
        )
        return rescore(trace, structure_ok=n > 0)
