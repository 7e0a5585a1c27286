"""The local executor: episodes run concurrently in this process over a host pool, on one
`EpisodeWorker`; how they are taken, recorded and interrupted is
`tracegen.generate.executor`'s."""

from __future__ import annotations

from tracegen.episode.spec import EpisodeSpec
from tracegen.generate.executor import Executor
from tracegen.generate.worker import EpisodeWorker
from tracegen.schema import Trace


class LocalExecutor(Executor):
    """Runs a plan's remaining episodes in this process."""

    worker: EpisodeWorker

    async def open(self) -> str:
        self.worker = await EpisodeWorker(self.settings, self.pool).open()
        self.reporter.live = lambda: (self.pool.completion_tokens, self.worker.executions)
        if self.worker.warning:
            self.reporter.warn(self.worker.warning)
        return f"sandbox {self.worker.summary}"

    async def close(self) -> None:
        await self.worker.aclose()

    async def run_one(self, spec: EpisodeSpec) -> Trace:
        trace = await self.worker.run(spec)
        self.stats.executions = self.worker.executions
        return trace
