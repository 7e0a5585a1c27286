"""`TracegenEnvironment`: a TRL ``environment_factory`` environment on tracegen's sandbox.

TRL's contract (``trl/trainer/grpo_trainer.py``, trl 1.16.0): instances are pooled and reused
("construct once, reset often"); ``reset(**row)`` gets the dataset row; every other public
method is a tool, its schema made from its name, type hints and docstring. The environment
has no ``get_reward``: the episode's final answer is in the model's completion, which TRL gives
to reward functions only, so the reward is `tracegen.trl.reward` (``reward_funcs=``), which
judges each environment's episode with its completion (`episode_trace`).

The tool is the native-tools mode's ``python``: a script runs in tracegen's sandbox and its
answer is the JSON that mode sends back (status, exit code, stdout, stderr); a call whose
``code`` is not a string is answered with a tool error, never run. The episode is judged as
tracegen's modes judge it: the final program is the last fenced program of the completion if
there is one, else the last script run that defines the problem's entry point (else the last
script); it is judged as ``tracegen verify`` judges it (`tracegen.grading.verdicts`): run
afresh against the problem's tests in the sandbox, never in the trainer's process, whatever
the scripts printed. A math problem's answer is the final answer of the completion's last
reply (``#### N``, ``\\boxed{}``…), else the one the final program prints when run again.

The mode and the problem set come from the run setup's reading of the settings
(`tracegen.generate.setup.Named`, as ``tracegen run`` reads them), once per process for the
same settings; the policy is sampled by the trainer, so no backend is decided.

The sandbox is shared by every instance of the process, on an event loop of its own (TRL
calls tools from its own threads and loops), each an `EpisodeWorker`'s
(`tracegen.generate.worker`); `close_sandboxes` ends it, and the next call of any instance
starts a new one. Every wait for the sandbox has a timeout (`wait_s`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from pydantic import ValidationError

from tracegen.config import RunSettings
from tracegen.episode.feedback import tool_error_json, tool_json
from tracegen.errors import ProblemFileError
from tracegen.generate.setup import Named
from tracegen.generate.worker import EpisodeWorker
from tracegen.grading.answers import extract_final_answer, grade_answer
from tracegen.grading.programs import judge_for
from tracegen.grading.reward import DEFAULT_WEIGHTS, RewardWeights, rescore
from tracegen.grading.verdicts import Solution, check_answer
from tracegen.parsing.program import defines
from tracegen.parsing.segment import segment
from tracegen.problems.files import problem_from_row
from tracegen.problems.formats import detect
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import ExecResult, Metrics, Problem, Trace, TraceError
from tracegen.trl.dataset import PROBLEM_COLUMN
from tracegen.trl.messages import Completion, assistant_texts

T = TypeVar("T")
MODE = "native-tools"


def wait_s(exec_timeout: float) -> float:
    """How long a call waits for the sandbox before giving up: far more than any execution
    or judgement takes, so only a sandbox that stopped answering reaches it."""
    return 120.0 + 20.0 * exec_timeout


class _LoopClosed(RuntimeError):
    """The loop was closed (`close_sandboxes`) between taking it and using it."""


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

    def run(self, call: Coroutine[Any, Any, T], timeout: float) -> T:
        """The result of ``call`` on the sandbox loop; `TimeoutError` after ``timeout`` s."""
        if not self.loop.is_running():
            call.close()
            raise _LoopClosed("the sandbox loop is closed")
        future = asyncio.run_coroutine_threadsafe(call, self.loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

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
        self._problem: Problem | None = None
        self._scripts: list[str] = []

    def _on_sandbox(self, use: Callable[[CodeRunner], Awaitable[T]]) -> T:
        """``use`` of the process's sandbox, on its loop (started again if `close_sandboxes`
        ended it, even while this call was on its way), waiting at most `wait_s`."""
        s = self._settings
        for attempt in range(2):
            loop = _SandboxLoop.shared()

            async def call(loop: _SandboxLoop = loop) -> T:
                return await use((await loop.worker(s)).runner)

            try:
                return loop.run(call(), wait_s(s.exec_timeout))
            except _LoopClosed:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @property
    def problem(self) -> Problem | None:
        """The problem of the episode (None before `reset`)."""
        return self._problem

    @property
    def scripts(self) -> list[str]:
        """The scripts the episode ran, in order."""
        return list(self._scripts)

    def reset(self, **row: Any) -> None:
        """Start an episode on the row's problem (TRL passes every column of the dataset's
        row): see `problem_of_row`."""
        self._problem = problem_of_row(row, self._settings)
        self._scripts = []

    def python(self, code: str) -> str:
        """Run a Python script in a sandbox and return its status, stdout and stderr.
        Print what you want to see.

        Args:
            code: The script to run.
        """
        if not isinstance(code, str):
            kind = "null" if code is None else type(code).__name__
            return tool_error_json(f'"code" must be a string (the script to run), not {kind}')
        if len(self._scripts) >= self._settings.max_iterations:
            limit = self._settings.max_iterations
            return tool_error_json(f"no executions left: this episode ran all {limit} scripts")
        try:
            result = self._on_sandbox(lambda box: box.run_code(code))
        except TimeoutError:
            return tool_error_json("the sandbox did not answer; the script was not run")
        self._scripts.append(code)
        return tool_json(result)


def problem_of_row(row: dict[str, Any], settings: RunSettings) -> Problem:
    """The problem a dataset row names, the first of: its ``problem`` column (a problem in
    tracegen's format, as JSON or a mapping: what `tracegen.trl.problems_dataset` writes);
    the row itself in a dataset's own format tracegen reads (HumanEval, MBPP, GSM8K,
    code_contests, APPS…, its columns kept as the dataset ships them); its ``problem_id``,
    a problem of the settings' problem set (``problems``, with ``limit`` and ``problem_ids``,
    read as `named` reads it). Anything else is a
    `ValueError` naming the row's columns and what would do."""
    if PROBLEM_COLUMN in row:
        value = row[PROBLEM_COLUMN]
        where = f"the dataset row's {PROBLEM_COLUMN!r} column"
        try:
            if isinstance(value, str | bytes):
                return Problem.model_validate_json(value)
            return problem_from_row(value, where, "dataset")
        except ValidationError as e:
            why = e.errors()[0]["msg"]
            raise ValueError(
                f"{where} is not a tracegen problem ({why}): it holds what "
                "tracegen.trl.problems_dataset writes there"
            ) from None
        except ProblemFileError as e:
            raise ValueError(str(e)) from None
    found = detect(row)
    if found is not None:
        name, mapper = found
        try:
            return mapper(row, 0)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"the dataset row is not a valid {name} row: {e}") from None
    problems = settings.problems
    if "problem_id" in row:
        known = named(settings)[1]
        problem = known.get(str(row["problem_id"]))
        if problem is None:
            examples = ", ".join(repr(i) for i in list(known)[:3])
            raise ValueError(
                f"problem_id {row['problem_id']!r} is not in the problem set {problems!r} "
                f"(its ids look like {examples}); give the environment the set the dataset "
                "was made from: TracegenEnvironment(RunSettings(problems=...))"
            )
        return problem
    columns = ", ".join(sorted(row)) or "none"
    raise ValueError(
        f"the dataset row names no problem (its columns: {columns}): give it a "
        f"{PROBLEM_COLUMN!r} column (tracegen.trl.problems_dataset makes one), a 'problem_id' "
        f"of the environment's problem set ({problems!r}), or keep the columns of a dataset "
        "tracegen reads (HumanEval, MBPP, GSM8K, code_contests, APPS…)"
    )


_NAMED: dict[str, tuple[Named, dict[str, Problem]]] = {}
_NAMED_LOCK = threading.Lock()


def named(settings: RunSettings) -> tuple[Named, dict[str, Problem]]:
    """The mode (`MODE`), its prompt and the problems ``settings`` name, as every run's setup
    reads them (`tracegen.generate.setup.Named`), with the problems by id: read when first
    asked, once per process for the same settings (TRL makes many environments of one)."""
    key = settings.model_dump_json()
    with _NAMED_LOCK:
        if key not in _NAMED:
            read = Named.read(settings, MODE, settings.problems)
            _NAMED[key] = read, {p.id: p for p in read.problems}
        return _NAMED[key]


async def _judge(box: CodeRunner, problem: Problem, code: str) -> ExecResult:
    if problem.kind == "math":
        return await check_answer(Solution(0, problem, code, None, None), box)
    judge = judge_for(box) if problem.is_program else None
    if judge is not None:
        return await judge.judge(problem, code)
    return await box.run_tests(code, problem)


def final_program(env: TracegenEnvironment) -> str | None:
    """The last script ``env`` ran that defines the entry point, else the last script run."""
    problem = env.problem
    entry = problem.entry_point if problem else None
    defining = [c for c in env.scripts if defines(c, entry)]
    scripts = defining or env.scripts
    return scripts[-1] if scripts else None


def episode_trace(
    env: TracegenEnvironment,
    completion: Completion | None = None,
    weights: RewardWeights = DEFAULT_WEIGHTS,
) -> Trace:
    """The episode of ``env``, scored (verdict, score, success, reward) as the module
    docstring says; ``completion`` is the model's, as TRL gives it to reward functions (a
    string, or a list of messages), None for the scripts alone. A sandbox that does not
    answer in `wait_s` makes a trace with a ``sandbox`` error (and the failed-episode
    reward). (A function, not a method: TRL makes every public method a tool.)"""
    problem = env.problem
    if problem is None:
        raise RuntimeError("an episode is judged after reset")
    replies = assistant_texts(completion)
    fenced = [s.text for r in replies for s in segment(r) if s.kind == "code"]
    code = fenced[-1] if fenced else final_program(env)
    answer = extract_final_answer(replies[-1]) if problem.kind == "math" and replies else None
    error = None
    verdict = None
    try:
        if problem.kind == "math" and answer is not None:
            verdict = grade_answer(problem, answer)
        elif code is not None:
            verdict = env._on_sandbox(lambda box: _judge(box, problem, code))
    except TimeoutError:
        error = TraceError(kind="sandbox", reason="no_answer", message="the sandbox did not answer")
    if verdict is not None and problem.kind == "math" and answer is None:
        answer = extract_final_answer(verdict.stdout)
    n = len(env.scripts)
    trace = Trace(
        id=f"trl-{problem.id}",
        problem_id=problem.id,
        mode=MODE,
        model="trl",
        final_code=code,
        final_answer=answer,
        verdict=verdict,
        metrics=Metrics(executions=n, tool_calls=n),
        error=error,
    )
    return rescore(trace, structure_ok=n > 0, weights=weights)
