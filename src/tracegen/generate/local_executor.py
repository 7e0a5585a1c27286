"""The local executor: episodes run concurrently in this process over a host pool, with one
warm sandbox; how they are taken, recorded and interrupted is `tracegen.generate.executor`'s."""

from __future__ import annotations

from tracegen.episode.engine import run_episode
from tracegen.episode.spec import EpisodeSpec
from tracegen.generate.executor import CountingRunner, Executor
from tracegen.llm.base import session
from tracegen.modes import get_mode
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.schema import Trace


class LocalExecutor(Executor):
    """Runs a plan's remaining episodes in this process."""

    sandbox: Sandbox
    runner: CountingRunner

    async def open(self) -> str:
        s = self.settings
        self.sandbox = Sandbox(
            isolation=s.sandbox,
            limits=SandboxLimits.for_timeout(s.exec_timeout),
            packages=s.sandbox_packages,
        )
        await self.sandbox.__aenter__()
        self.runner = CountingRunner(self.sandbox)
        self.reporter.live = lambda: (self.pool.completion_tokens, self.runner.executions)
        if self.sandbox.warning:
            self.reporter.warn(self.sandbox.warning)
        return f"sandbox {self.sandbox.summary}"

    async def close(self) -> None:
        await self.sandbox.aclose()

    async def run_one(self, spec: EpisodeSpec) -> Trace:
        with session(spec.trace_id):
            trace = await run_episode(spec, get_mode(spec.settings.mode), self.pool, self.runner)
        self.stats.executions = self.runner.executions
        return trace
