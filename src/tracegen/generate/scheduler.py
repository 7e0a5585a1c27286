"""The local scheduler: episodes run concurrently over a host pool, each recorded as it ends.

A fixed set of ``concurrency × hosts`` workers pulls episodes from the plan's lazy iterator,
so memory does not grow with the number of problems. Each worker runs `run_episode` and
records the trace (`tracegen.generate.runfiles` keeps the files resumable). SIGINT/SIGTERM
stop the intake, give in-flight episodes `GRACE_S` seconds, then cancel them; a cancelled
episode is not recorded and runs again on resume. A second signal cancels at once.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
from collections import deque
from collections.abc import Iterator

from tracegen.config import RunSettings
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import BackendError, LogprobsMissing
from tracegen.generate.episode import run_episode
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
from tracegen.grading.filters import Filters
from tracegen.llm.pool import HostPool
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Trace

GRACE_S = 5.0
MAX_PUT_BACKS = 5
"""How often an episode the backend gave up on runs again before its failure is recorded."""
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


def resume_command() -> str:
    """The command that continues this run: the same one, without ``--overwrite``."""
    return shlex.join(["tracegen", *(a for a in sys.argv[1:] if a != "--overwrite")])


def put_back(trace: Trace, tries: int) -> bool:
    """Whether to run an episode the backend gave up on again later rather than record it:
    outages and overloads pass, so only an episode that keeps failing is recorded."""
    error = trace.error
    return error is not None and error.kind == "backend" and tries < MAX_PUT_BACKS


class LocalScheduler:
    """Runs a plan's remaining episodes in this process; see the module docstring."""

    def __init__(
        self,
        settings: RunSettings,
        plan: Plan,
        files: RunFiles,
        pool: HostPool,
        stats: RunStats,
        reporter: Reporter,
    ) -> None:
        self.settings = settings
        self.plan = plan
        self.files = files
        self.pool = pool
        self.stats = stats
        self.reporter = reporter
        self.filters = Filters(settings.only_success, settings.only_ideal)
        self.stopping = False
        self.interrupted_by: signal.Signals | None = None
        self.warned_internal = False
        self.again: deque[tuple[EpisodeSpec, int]] = deque()
        self.workers: list[asyncio.Task[None]] = []

    async def execute(self) -> int:
        s = self.settings
        loop = asyncio.get_running_loop()
        for sig in EXIT_SIGNAL:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            limits = SandboxLimits.for_timeout(s.exec_timeout)
            await self._execute(Sandbox(isolation=s.sandbox, limits=limits))
        finally:
            for sig in EXIT_SIGNAL:
                loop.remove_signal_handler(sig)
        self.reporter.summary(
            [(h.name, h.served, h.failures, h.times_benched) for h in self.pool.hosts],
            rejects=s.rejects,
        )
        if self.interrupted_by is not None:
            left = self.stats.total - self.stats.done
            self.reporter.notice(
                f"interrupted with {left} episodes left; to resume, run:\n  {resume_command()}"
            )
            return EXIT_SIGNAL[self.interrupted_by]
        return 0

    async def _execute(self, sandbox: Sandbox) -> None:
        s = self.settings
        work = self.plan.specs(self.files.done)
        async with sandbox:
            if sandbox.warning:
                self.reporter.warn(sandbox.warning)
            self.reporter.info(
                f"tracegen run: {self.stats.total} episodes to go ({self.stats.skipped} done "
                f"before) · mode {s.mode} · model {s.model} · {len(s.hosts)} host(s) × "
                f"{s.concurrency} · sandbox {sandbox.isolation} → {s.output}"
            )
            self.reporter.start()
            self.workers = workers = [
                asyncio.create_task(self._worker(work, sandbox))
                for _ in range(s.concurrency * len(s.hosts))
            ]
            try:
                await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                self._abandon()
                results = await asyncio.gather(*workers, return_exceptions=True)
                self.reporter.stop()
        for r in results:
            if isinstance(r, Exception):
                raise r

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.stopping:
            self._abandon()
            return
        self.stopping = True
        self.interrupted_by = sig
        self.reporter.warn(
            f"{sig.name}: finishing the episodes in flight for up to {GRACE_S:.0f}s; "
            "send it again to stop at once"
        )
        asyncio.get_running_loop().call_later(GRACE_S, self._abandon)

    def _abandon(self) -> None:
        """Cancel the episodes in flight: they are not recorded and run again on resume."""
        for w in self.workers:
            w.cancel()

    def _next(self, work: Iterator[EpisodeSpec]) -> tuple[EpisodeSpec, int] | None:
        """An episode put back after a host outage first, else the next new one."""
        if self.again:
            return self.again.popleft()
        spec = next(work, None)
        return None if spec is None else (spec, 0)

    async def _worker(self, work: Iterator[EpisodeSpec], sandbox: CodeRunner) -> None:
        while not self.stopping:
            item = self._next(work)
            if item is None:
                return
            spec, tries = item
            trace = await self._episode(spec, sandbox)
            if put_back(trace, tries):
                self.again.append((spec, tries + 1))
                self.stats.put_back += 1
                continue
            outcome = self.filters.outcome(trace)
            self.files.record(trace, outcome)
            self.stats.add(trace, outcome == "accepted")
            self.reporter.update()

    async def _episode(self, spec: EpisodeSpec, sandbox: CodeRunner) -> Trace:
        try:
            trace = await run_episode(spec, self.pool, sandbox)
        except BackendError as e:
            raise self._fatal(e) from None
        if self.pool.outage is not None:
            raise self._fatal(self.pool.outage)
        error = trace.error
        if error is not None and error.kind == "internal" and not self.warned_internal:
            self.warned_internal = True
            self.reporter.warn(
                f"{spec.problem.id} sample {spec.sample}: {error.message} (recorded as failed)"
            )
        if self.settings.require_logprobs and trace.logprobs_status == "absent":
            raise LogprobsMissing(
                f"the server returned no logprobs for {spec.problem.id} (model "
                f"{self.settings.model}); drop --require-logprobs or use a backend that "
                "returns them"
            )
        return trace

    def _fatal(self, e: BackendError) -> BackendError:
        if e is self.pool.outage:
            return type(e)(f"{e}; once a server is back, run the same command to resume")
        return e
