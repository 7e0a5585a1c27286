"""A whole run through `RayExecutor.execute` on stand-in actors, with no Ray instance: the
run's settings and plan, an executor that joins the stand-ins where it would start actors,
and the run files and host pool around it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.runs import write_problems
from tracegen.config import RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.ray_executor import Actors, RayExecutor, RunParts
from tracegen.generate.runfiles import RunFiles
from tracegen.llm.factory import backend_for
from tracegen.llm.pool import HostPool
from tracegen.problems import load_problems


def stand_in_plan(
    problems: Path, episodes: int, *, concurrency: int, output: Path, **settings: Any
) -> tuple[RunSettings, Plan]:
    """The settings of a Ray run of the markers mode writing ``output`` (``settings`` on
    top), and its plan: one sample of each of ``episodes`` problems, written to
    ``problems``."""
    run = RunSettings(
        mode="markers",
        model="test-model",
        backend="ollama",
        hosts=["http://127.0.0.1:9"],
        concurrency=concurrency,
        executor="ray",
        output=output,
        quiet=True,
        **settings,
    )
    prompt = load_prompt("markers", None)
    loaded = load_problems(str(write_problems(problems, episodes)), limit=None, problem_ids=None)
    return run, Plan(loaded, run.generation(), prompt, 1, None)


class StandInExecutor(RayExecutor):
    """A `RayExecutor` whose actors are its `stand_ins`, joined on open: nothing to start
    or stop."""

    def stand_ins(self) -> Sequence[Any]:
        """The `ray_executor._Actor`\\ s it runs on."""
        raise NotImplementedError

    async def open(self) -> str:
        plan = self.plan
        parts = RunParts(plan.settings, plan.system_prompt, plan.settings_hash)
        self.actors = Actors(self.settings, parts, self.settings.concurrency, warn=print)
        for actor in self.stand_ins():
            self.actors.join(actor)
        return "stand-ins"

    async def close(self) -> None:
        pass


@contextlib.asynccontextmanager
async def stand_in_executor(
    kind: type[StandInExecutor], run: RunSettings, plan: Plan
) -> AsyncIterator[StandInExecutor]:
    """An executor of ``kind`` for ``plan``, its run files open (overwritten) and its host
    pool ready until the block ends; the block runs it (`execute`)."""
    stats = RunStats()
    files = RunFiles(
        run.output,
        None,
        settings_hash=plan.settings_hash,
        settings=plan.settings.record(plan.system_prompt),
        overwrite=True,
        warn=print,
    )
    pool = HostPool([backend_for(run, run.hosts[0])], limit=run.concurrency)
    stats.total = plan.size
    try:
        yield kind(run, plan, files, pool, stats, Reporter(stats, lambda: 0, display="quiet"))
    finally:
        files.close()
        await pool.aclose()
