"""`tracegen run`: decide the run (`prepare`), open the run files and the model servers, execute."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

from tracegen.config import RunSettings
from tracegen.generate.executor import Executor
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
from tracegen.generate.setup import describe, prepare
from tracegen.generate.shards import (
    Manifest,
    Shard,
    claim_manifest,
    mark_done,
    parse_shard,
    plan_manifest,
    shard_file,
    shard_plan,
    unmark_done,
)
from tracegen.jsonl import special_file_warning
from tracegen.llm.factory import open_pool
from tracegen.llm.pool import HostPool


def _local_executor() -> type[Executor]:
    from tracegen.generate.local_executor import LocalExecutor

    return LocalExecutor


def _ray_executor() -> type[Executor]:
    from tracegen.generate.ray_executor import RayExecutor  # imports Ray: only when chosen

    return RayExecutor


EXECUTORS: dict[str, Callable[[], type[Executor]]] = {
    "local": _local_executor,
    "ray": _ray_executor,
}
"""Where episodes run, by the name ``--executor`` takes: each entry loads its class when
chosen."""


def executor_class(name: str) -> type[Executor]:
    return EXECUTORS[name]()


def run_command(settings: RunSettings) -> int:
    """Run every episode not yet attempted; return the exit status."""
    return asyncio.run(_run(settings))


async def _run(settings: RunSettings) -> int:
    stats = RunStats()
    pool: HostPool | None = None
    reporter = Reporter(
        stats, lambda: pool.in_flight if pool else 0, display=Reporter.choose(settings.quiet)
    )
    executor = executor_class(settings.executor)
    setup = await prepare(settings, reporter.info, in_process=executor.in_process)
    settings, plan, local = setup.settings, setup.plan, setup.local
    output, rejects = settings.output, settings.rejects
    shard: tuple[Shard, Manifest] | None = None
    if settings.shard is not None:
        part = parse_shard(settings.shard, os.environ)
        manifest = plan_manifest(plan, part.count, sys.argv[1:], settings.rejects)
        claim_manifest(settings.output, manifest)
        shard = part, manifest
        plan = shard_plan(plan, part)
        output = shard_file(output, part)
        rejects = shard_file(rejects, part) if rejects is not None else None
    for path in (output, rejects):
        if path is not None and (warning := special_file_warning(path)):
            reporter.warn(warning)
    files = RunFiles(
        output,
        rejects,
        settings_hash=plan.settings_hash,
        settings=plan.record(),
        overwrite=settings.overwrite,
        warn=reporter.warn,
        plan=shard[1].fingerprint(shard[0].index) if shard is not None else None,
        start=False,
    )
    status = 0
    try:
        again = files.supersede(plan.within(files.failed))
        if again:
            reporter.info(f"{again} episodes the server, the sandbox or tracegen failed run again")
        stats.total = plan.count(files.done)
        stats.skipped = plan.size - stats.total
        if stats.total == 0:
            reporter.info(f"nothing to do: all {plan.size} episodes were already run")
        else:
            if local is not None:
                reporter.info(local.describe(constrained=setup.choices.constrain))
            pool = await open_pool(
                settings,
                setup.chosen,
                on_retry=reporter.retry,
                warn=reporter.warn,
                continues_message=setup.mode.continues_message,
                local=local,
            )
            if local is not None:
                reporter.info(f"local: model loaded in {local.load_s:.1f}s")
            try:
                header = setup.answered(pool.kind).header()
                files.start(header)  # a server answered: the files change from here on
                if shard is not None:
                    unmark_done(output)
                run = executor(
                    settings, plan, files, pool, stats, reporter, decided=describe(header)
                )
                status = await run.execute()
            finally:
                await pool.aclose()
        finished = plan.count(files.done) == 0
    finally:
        files.close()
        if local is not None:
            await local.aclose()
    if shard is not None and status == 0 and finished:
        mark_done(output, *shard)
        reporter.info(f"shard {shard[0]} is done: {output}")
    return status
