"""What `tracegen verify` runs: each solution judged on an `EpisodeWorker`'s sandbox, a
bounded number at a time, verdicts given back in file order (`tracegen.views.verdict_stream`
shows them)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator

from tracegen.config import RunSettings
from tracegen.generate.worker import EpisodeWorker
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.grading.verdicts import Solution, Verdict, verify_one
from tracegen.sandbox import SandboxLimits
from tracegen.sandbox.programs import Programs

IN_FLIGHT = 4
"""Solutions started per sandbox worker before the oldest one's verdict is awaited."""


async def verify_stream(
    solutions: Iterator[Solution],
    isolation: str,
    warn: Callable[[str], None],
    emit: Callable[[Verdict], None],
    options: JudgeOptions | None = None,
    packages: bool = False,
) -> None:
    """Run ``solutions``, a bounded number at a time; ``emit`` each verdict in file order;
    ``packages``: programs may import tracegen's (``--sandbox-packages``)."""
    settings = RunSettings.model_validate({"sandbox": isolation, "sandbox_packages": packages})
    async with EpisodeWorker(settings, limits=SandboxLimits()) as worker:
        if worker.warning:
            warn(worker.warning)
        sandbox = worker.sandbox
        judge = ProgramJudge(Programs.cached_on_disk(sandbox), options)
        window = IN_FLIGHT * sandbox.concurrency
        pending: deque[asyncio.Task[Verdict]] = deque()
        try:
            for solution in solutions:
                pending.append(asyncio.create_task(verify_one(solution, sandbox, judge)))
                if len(pending) >= window:
                    emit(await pending.popleft())
            while pending:
                emit(await pending.popleft())
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
