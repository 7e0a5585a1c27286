"""`EpisodeWorker`: the one way an episode runs, wherever it runs.

A worker owns a warm sandbox (`tracegen.sandbox.Sandbox`), a runner over it that counts the
executions, and the call that holds one episode's conversation (`run_episode`, in the
episode's logging session). The local executor has one; each Ray actor has one; the Atropos
and TRL environments and a library user have one. Built from the settings of a
`tracegen.generate.setup.RunSetup`:

    async with EpisodeWorker(setup.settings, pool) as worker:
        trace = await worker.run(spec)
"""

from __future__ import annotations

from typing import Unpack

from tracegen.config import RunSettings
from tracegen.episode.engine import run_episode
from tracegen.episode.spec import EpisodeSpec
from tracegen.llm.base import Backend, session
from tracegen.modes import get_mode
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.runner import ProcessOptions, ProcessRun
from tracegen.schema import ExecResult, Problem, Trace


class CountingRunner:
    """The worker's `Sandbox`, counting the executions it passes on (``executions``): a
    `CodeRunner`, and a program judge's `tracegen.sandbox.programs.ProcessRunner`."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.isolation = sandbox.isolation
        self.executions = 0

    async def run_tests(self, code: str, problem: Problem) -> ExecResult:
        self.executions += 1
        return await self.sandbox.run_tests(code, problem)

    async def run_code(self, code: str) -> ExecResult:
        self.executions += 1
        return await self.sandbox.run_code(code)

    @property
    def limits(self) -> SandboxLimits:
        """The limits of the sandbox it passes executions on to."""
        return self.sandbox.limits

    async def run_process(self, code: str, **options: Unpack[ProcessOptions]) -> ProcessRun:
        """An execution of a program problem's judge (`Sandbox.run_process`), counted too."""
        self.executions += 1
        return await self.sandbox.run_process(code, **options)


class EpisodeWorker:
    """A warm sandbox and the episodes run on it (see the module docstring).

    ``settings`` give the isolation (``sandbox``), the time each execution may run
    (``exec_timeout``) and whether programs may import tracegen's packages
    (``sandbox_packages``); ``backend`` answers the episodes unless `run` is given another;
    ``concurrency`` caps the executions at once (default: one per core); ``limits`` replace
    those of ``exec_timeout``.
    """

    def __init__(
        self,
        settings: RunSettings,
        backend: Backend | None = None,
        *,
        concurrency: int | None = None,
        limits: SandboxLimits | None = None,
    ) -> None:
        self.backend = backend
        self.sandbox = Sandbox(
            isolation=settings.sandbox,
            limits=limits or SandboxLimits.for_timeout(settings.exec_timeout),
            concurrency=concurrency,
            packages=settings.sandbox_packages,
        )
        self.runner = CountingRunner(self.sandbox)

    @property
    def summary(self) -> str:
        """The sandbox's isolation and its layers, in one line."""
        return self.sandbox.summary

    @property
    def warning(self) -> str | None:
        """What the sandbox's isolation lacks here, if anything."""
        return self.sandbox.warning

    @property
    def executions(self) -> int:
        return self.runner.executions

    async def open(self) -> EpisodeWorker:
        """Warm the sandbox (its fork parent)."""
        await self.sandbox.__aenter__()
        return self

    async def aclose(self) -> None:
        await self.sandbox.aclose()

    async def __aenter__(self) -> EpisodeWorker:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, spec: EpisodeSpec, backend: Backend | None = None) -> Trace:
        """Run one episode to its trace (`run_episode`): an error no other episode would
        survive either is raised."""
        answering = backend or self.backend
        if answering is None:
            raise ValueError("EpisodeWorker.run needs a backend: give one to the worker or here")
        with session(spec.trace_id):
            return await run_episode(spec, get_mode(spec.settings.mode), answering, self.runner)
