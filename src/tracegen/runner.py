"""`tracegen run`: episodes run concurrently over a host pool, filtered and written to JSONL.

A fixed set of ``concurrency × hosts`` workers pulls (problem, sample) items from one lazy
work iterator, so memory does not grow with the number of problems. Each worker builds an
`Episode`, awaits the mode and records the trace (`tracegen.resume` keeps the files
resumable). SIGINT/SIGTERM stop the intake, give in-flight episodes `GRACE_S` seconds, then
cancel them; a cancelled episode is not recorded and runs again on resume. A second signal
cancels at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import shlex
import signal
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from tracegen.config import GenerationSettings, RunSettings
from tracegen.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    LogprobsMissing,
    TracegenError,
)
from tracegen.llm.ollama import PROBE_TIMEOUT_S, OllamaBackend
from tracegen.llm.pool import HostPool
from tracegen.modes import get_mode
from tracegen.modes.base import Episode, Mode
from tracegen.modes.limits import backend_failure
from tracegen.plan import Key, episode_seed, trace_id, work_order
from tracegen.problems import load_problems
from tracegen.progress import Reporter, RunStats
from tracegen.prompts import load_prompt
from tracegen.resume import Outcome, RunFiles, settings_record
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Problem, Trace, TraceError

GRACE_S = 5.0
MAX_PUT_BACKS = 5
"""How often an episode the backend gave up on runs again before its failure is recorded."""
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


def run_command(settings: RunSettings) -> int:
    """Run every episode not yet attempted; return the exit status."""
    return asyncio.run(_run(settings))


def outcome_of(trace: Trace, settings: RunSettings) -> Outcome:
    """``accepted`` when the trace has no error and passes the filters."""
    if trace.error is not None:
        return "failed"
    if (settings.only_success and not trace.success) or (
        settings.only_ideal and not trace.is_ideal
    ):
        return "rejected"
    return "accepted"


def _put_back(trace: Trace, tries: int) -> bool:
    """Whether to run an episode the backend gave up on again later rather than record it:
    outages and overloads pass, so only an episode that keeps failing is recorded."""
    error = trace.error
    return error is not None and error.kind == "backend" and tries < MAX_PUT_BACKS


def resume_command() -> str:
    """The command that continues this run: the same one, without ``--overwrite``."""
    return shlex.join(["tracegen", *(a for a in sys.argv[1:] if a != "--overwrite")])


async def _run(settings: RunSettings) -> int:
    stats = RunStats()
    pool: HostPool | None = None
    reporter = Reporter(
        stats, lambda: pool.in_flight if pool else 0, display=Reporter.choose(settings.quiet)
    )
    mode = get_mode(settings.mode)
    system_prompt = load_prompt(settings.mode, settings.prompts_dir)
    problems = load_problems(
        settings.problems, limit=settings.limit, problem_ids=settings.problem_ids
    )
    generation = settings.generation()
    settings_hash = generation.digest(system_prompt)
    files = RunFiles(
        settings.output,
        settings.rejects,
        settings_hash=settings_hash,
        settings=settings_record(generation, system_prompt),
        overwrite=settings.overwrite,
        warn=reporter.warn,
    )
    try:
        planned = len(problems) * settings.num_samples
        stats.total = sum(
            _key(p, s, settings) not in files.done
            for p, s in work_order(problems, settings.num_samples, settings.seed)
        )
        stats.skipped = planned - stats.total
        if stats.total == 0:
            reporter.info(f"nothing to do: all {planned} episodes were already run")
            return 0
        pool = await _open_pool(settings, reporter)
        try:
            with reporter.retries_from(logging.getLogger("tracegen.llm")):
                return await _Run(
                    settings,
                    mode,
                    problems,
                    files,
                    pool,
                    stats,
                    reporter,
                    system_prompt,
                    generation,
                ).execute()
        finally:
            await pool.aclose()
    finally:
        files.close()


def _key(problem: Problem, sample: int, settings: RunSettings) -> Key:
    return (problem.id, sample, settings.mode, settings.model)


async def _open_pool(settings: RunSettings, reporter: Reporter) -> HostPool:
    """One backend per host; stop at once if no host answers, bench those that do not."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else None

    async def probe(host: str) -> str | None:
        """Why ``host`` cannot be reached, or None: any HTTP answer means it can."""
        async with OllamaBackend(
            host, settings.model, api_key=api_key, timeout_s=PROBE_TIMEOUT_S, max_attempts=1
        ) as backend:
            try:
                await backend.version()
            except (BackendUnavailable, BackendTimeout) as e:
                return str(e)
            except BackendError:
                pass
        return None

    problems = await asyncio.gather(*(probe(h) for h in settings.hosts))
    down = {h: p for h, p in zip(settings.hosts, problems, strict=True) if p is not None}
    if len(down) == len(settings.hosts):
        raise BackendUnavailable(
            f"{'; '.join(down.values())} (--host or OLLAMA_HOST says where Ollama runs)"
        )
    backends = [
        OllamaBackend(
            h,
            settings.model,
            api_key=api_key,
            timeout_s=settings.request_timeout_s,
            max_attempts=settings.max_attempts,
            retry_initial_s=settings.retry_initial_s,
            max_connections=settings.concurrency,
        )
        for h in settings.hosts
    ]
    pool = HostPool(backends, limit=settings.concurrency)
    for host, problem in down.items():
        reporter.warn(f"{host} does not answer ({problem}); going on with the other hosts")
        pool.bench(host, problem)
    return pool


@dataclass
class _Run:
    settings: RunSettings
    mode: Mode
    problems: list[Problem]
    files: RunFiles
    pool: HostPool
    stats: RunStats
    reporter: Reporter
    system_prompt: str
    generation: GenerationSettings
    stopping: bool = False
    interrupted_by: signal.Signals | None = None
    warned_internal: bool = False
    put_back: deque[tuple[Problem, int, int]] = field(default_factory=deque)
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    async def execute(self) -> int:
        s = self.settings
        loop = asyncio.get_running_loop()
        for sig in EXIT_SIGNAL:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            limits = SandboxLimits(timeout_s=s.exec_timeout, cpu_s=math.ceil(s.exec_timeout))
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
        work = self._work()
        async with sandbox:
            if sandbox.warning:
                self.reporter.warn(sandbox.warning)
            self.reporter.info(
                f"tracegen run: {self.stats.total} episodes to go ({self.stats.skipped} done "
                f"before) · mode {s.mode} · model {s.model} · {len(s.hosts)} host(s) × "
                f"{s.concurrency} · sandbox {sandbox.summary} → {s.output}"
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

    def _work(self) -> Iterator[tuple[Problem, int]]:
        s = self.settings
        for problem, sample in work_order(self.problems, s.num_samples, s.seed):
            if _key(problem, sample, s) not in self.files.done:
                yield problem, sample

    def _next(self, work: Iterator[tuple[Problem, int]]) -> tuple[Problem, int, int] | None:
        """An episode put back after a host outage first, else the next new one."""
        if self.put_back:
            return self.put_back.popleft()
        item = next(work, None)
        return None if item is None else (*item, 0)

    async def _worker(self, work: Iterator[tuple[Problem, int]], sandbox: CodeRunner) -> None:
        while not self.stopping:
            item = self._next(work)
            if item is None:
                return
            problem, sample, tries = item
            trace = await self._episode(problem, sample, sandbox)
            if _put_back(trace, tries):
                self.put_back.append((problem, sample, tries + 1))
                self.stats.put_back += 1
                continue
            outcome = outcome_of(trace, self.settings)
            self.files.record(trace, outcome)
            self.stats.add(trace, outcome == "accepted")
            self.reporter.update()

    async def _episode(self, problem: Problem, sample: int, sandbox: CodeRunner) -> Trace:
        s = self.settings
        key = _key(problem, sample, s)
        settings_hash = self.files.settings_hash
        episode = Episode(
            problem=problem,
            sample=sample,
            trace_id=trace_id(key, settings_hash),
            settings=self.generation,
            settings_hash=settings_hash,
            system_prompt=self.system_prompt,
            seed=episode_seed(s.seed, problem.id, sample),
            backend=self.pool,
            sandbox=sandbox,
        )
        try:
            trace = await self.mode.run(episode)
        except BackendError as e:
            if not e.retryable or self.pool.outage is not None:
                raise self._fatal(e) from None
            trace = _failed(episode, s, backend_failure(e))
        except TracegenError:
            raise
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            if not self.warned_internal:
                self.warned_internal = True
                self.reporter.warn(f"{problem.id} sample {sample}: {message} (recorded as failed)")
            error = TraceError(kind="internal", reason="unexpected_exception", message=message)
            trace = _failed(episode, s, error)
        if self.pool.outage is not None:
            raise self._fatal(self.pool.outage)
        if s.require_logprobs and trace.logprobs_status == "absent":
            raise LogprobsMissing(
                f"the server returned no logprobs for {problem.id} (model {s.model}); "
                "drop --require-logprobs or use a backend that returns them"
            )
        return trace.model_copy(
            update={
                "id": episode.trace_id,
                "problem_id": problem.id,
                "sample": sample,
                "mode": s.mode,
                "model": s.model,
                "settings_hash": settings_hash,
            }
        )

    def _fatal(self, e: BackendError) -> BackendError:
        if e is self.pool.outage:
            return type(e)(f"{e}; once a server is back, run the same command to resume")
        return e


def _failed(episode: Episode, settings: RunSettings, error: TraceError) -> Trace:
    return Trace(
        id=episode.trace_id,
        problem_id=episode.problem.id,
        sample=episode.sample,
        mode=settings.mode,
        model=settings.model,
        settings_hash=episode.settings_hash,
        error=error,
    )
