"""What every executor shares: taking episodes, recording what they give, signals, the summary.

An executor runs a plan's remaining episodes on some workers — `LocalExecutor` in this
process, `tracegen.generate.ray_executor.RayExecutor` on actors across a Ray cluster — and this
process stays the only writer of the run files. A fixed set of asyncio workers (one per
host slot: ``concurrency × hosts``) pulls episodes from the plan's lazy iterator, episodes
put back first, so memory does not grow with the number of problems; each finished trace
goes through `Recorder`, the one way a trace is recorded. SIGINT/SIGTERM stop the intake,
give in-flight episodes `GRACE_S` seconds, then cancel them; a cancelled episode is not
recorded and runs again on resume. A second signal cancels at once.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
from collections import deque
from collections.abc import Iterator
from typing import ClassVar

from tracegen.config import RunSettings, redact_url
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import BackendError, LogprobsMissing, runs_again
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
from tracegen.grading.filters import Filters
from tracegen.llm.pool import HostPool
from tracegen.schema import Trace

GRACE_S = 5.0
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


def resume_command() -> str:
    """The command that continues this run: the same one, without ``--overwrite``, a URL's
    credentials shown as ``***``."""
    return shlex.join(["tracegen", *(redact_url(a) for a in sys.argv[1:] if a != "--overwrite")])


def put_back(trace: Trace, tries: int) -> bool:
    """Whether to run an episode the backend gave up on again later rather than record it
    (`tracegen.errors.runs_again`)."""
    error = trace.error
    return error is not None and error.kind == "backend" and runs_again(error.reason, tries)


class Recorder:
    """The one way a finished trace is recorded, whichever executor ran it: put back, or
    checked, filtered, written (`RunFiles`), counted and shown."""

    def __init__(
        self,
        settings: RunSettings,
        model: str,
        files: RunFiles,
        stats: RunStats,
        reporter: Reporter,
    ) -> None:
        self.settings = settings
        self.model = model
        """The model the run asks (as decided: `tracegen.generate.setup.RunSetup.model`)."""
        self.files = files
        self.stats = stats
        self.reporter = reporter
        self.filters = Filters(settings.only_success, settings.only_ideal)
        self.warned_internal = False
        self.server_failures = 0
        """Episodes recorded as failed because of the server (``kind="backend"``)."""
        self.last_server_failure = ""

    def record(
        self, spec: EpisodeSpec, trace: Trace, tries: int, line: bytes | None = None
    ) -> bool:
        """Record ``trace`` (the episode's ``tries``-th run); False when it is put back.
        ``line``: the trace already dumped as it is written (see `RunFiles.record`)."""
        error = trace.error
        if error is not None and error.kind == "internal" and not self.warned_internal:
            self.warned_internal = True
            self.reporter.warn(
                f"{spec.problem.id} sample {spec.sample}: {error.message} (recorded as failed)"
            )
        if self.settings.require_logprobs and trace.logprobs_status == "absent":
            raise LogprobsMissing(
                f"the server returned no logprobs for {spec.problem.id} (model "
                f"{self.model}); drop --require-logprobs or use a backend that "
                "returns them"
            )
        if put_back(trace, tries):
            self.stats.put_back += 1
            return False
        if error is not None and error.kind == "backend":
            self.server_failures += 1
            self.last_server_failure = f"{error.reason}: {error.message}"
        outcome = self.filters.outcome(trace)
        self.files.record(trace, outcome, line)
        self.stats.add(trace, outcome)
        self.reporter.update()
        return True


class Executor:
    """Runs a plan's remaining episodes and records them; see the module docstring.
    Subclasses set up their workers (`open`, `close`) and say how an episode runs on them
    (`run_one`)."""

    unit = "requests"
    """What the pool's per-host counts are in the summary."""
    in_process: ClassVar[bool] = True
    """Whether episodes run in this process, where the embedded model (``--backend local``)
    can serve them."""

    def __init__(
        self,
        settings: RunSettings,
        plan: Plan,
        files: RunFiles,
        pool: HostPool,
        stats: RunStats,
        reporter: Reporter,
        *,
        decided: str | None = None,
    ) -> None:
        self.settings = settings
        self.plan = plan
        self.decided = decided or f"mode {plan.settings.mode} · model {plan.settings.model}"
        """What the run decided, as its opening line says it
        (`tracegen.generate.setup.describe`)."""
        self.files = files
        self.pool = pool
        self.stats = stats
        self.reporter = reporter
        self.recorder = Recorder(settings, plan.settings.model, files, stats, reporter)
        self.stopping = False
        self.interrupted_by: signal.Signals | None = None
        self.again: deque[tuple[EpisodeSpec, int]] = deque()
        self.workers: list[asyncio.Task[None]] = []

    async def open(self) -> str:
        """Get the workers ready (before signals are handled; on failure, release what was
        taken); say where episodes run."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release what `open` took, whatever happened."""

    async def run_one(self, spec: EpisodeSpec) -> Trace:
        """Run one episode to its trace; a `BackendError` stops the run."""
        raise NotImplementedError

    def summary_rows(self) -> list[tuple[str, str]]:
        """Rows this executor adds to the summary."""
        return []

    def line_of(self, trace: Trace) -> bytes | None:
        """The JSON line ``trace`` (a result of `run_one`) came as, already dumped, if any."""
        return None

    async def execute(self) -> int:
        """Run the episodes; the summary; the exit status (130/143 when interrupted)."""
        where = await self.open()
        try:
            self.intro(where)
            loop = asyncio.get_running_loop()
            for sig in EXIT_SIGNAL:
                loop.add_signal_handler(sig, self._on_signal, sig)
            try:
                await self.run_workers()
            finally:
                for sig in EXIT_SIGNAL:
                    loop.remove_signal_handler(sig)
        finally:
            await self.close()
        self.reporter.summary(
            [(h.name, h.served, h.failures, h.times_benched) for h in self.pool.hosts],
            rejects=self.files.rejects,
            unit=self.unit,
            extra=self.summary_rows(),
        )
        if self.interrupted_by is not None:
            left = self.stats.total - self.stats.done
            self.reporter.notice(
                f"interrupted with {left} episodes left; to resume, run:\n  {resume_command()}"
            )
            return EXIT_SIGNAL[self.interrupted_by]
        failed = self.recorder.server_failures
        if failed and failed == self.stats.done:
            raise BackendError(
                f"no episode produced a trace: all {failed} failed on the server, the last "
                f"with {self.recorder.last_server_failure}"
            )
        return 0

    def intro(self, where: str) -> None:
        s = self.settings
        self.reporter.info(
            f"tracegen run: {self.stats.total} episodes to go ({self.stats.skipped} done "
            f"before) · {self.decided} · {len(s.hosts)} host(s) × {s.concurrency} · {where} → "
            f"{self.files.output}"
        )

    async def run_workers(self) -> None:
        """One worker per host slot until the plan is done, a signal, or a fatal error."""
        work = self.plan.specs(self.files.done)
        self.reporter.start()
        count = self.settings.concurrency * len(self.settings.hosts)
        self.workers = workers = [asyncio.create_task(self._worker(work)) for _ in range(count)]
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

    async def _worker(self, work: Iterator[EpisodeSpec]) -> None:
        while not self.stopping:
            item = self._next(work)
            if item is None:
                return
            spec, tries = item
            trace = await self.run_one(spec)  # what stops the run is raised (`errors.Stops`)
            if not self.recorder.record(spec, trace, tries, self.line_of(trace)):
                self.again.append((spec, tries + 1))
