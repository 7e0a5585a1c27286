"""The local scheduler: episodes run concurrently in this process over a host pool, with one
warm sandbox; how they are taken, recorded and interrupted is `tracegen.generate.executor`'s."""

from __future__ import annotations

from tracegen.episode.spec import EpisodeSpec
from tracegen.generate.episode import run_episode
from tracegen.generate.executor import CountingRunner, Executor
from tracegen.llm.base import session
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.schema import Trace


class LocalScheduler(Executor):
    """Runs a plan's remaining episodes in this process."""

    runner: CountingRunner

    async def _execute(self) -> None:
        s = self.settings
        sandbox = Sandbox(isolation=s.sandbox, limits=SandboxLimits.for_timeout(s.exec_timeout))
        self.runner = CountingRunner(sandbox)
        async with sandbox:
            if sandbox.warning:
                self.reporter.warn(sandbox.warning)
            self.intro(f"sandbox {sandbox.isolation}")
            await self.run_workers()

    async def run_one(self, spec: EpisodeSpec) -> Trace:
        with session(spec.trace_id):
            trace = await run_episode(spec, self.pool, self.runner)
        self.stats.executions = self.runner.executions
        return trace
