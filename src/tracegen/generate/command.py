"""`tracegen run`: plan the episodes, open the run files and the model servers, schedule."""

from __future__ import annotations

import asyncio

from tracegen.config import RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
from tracegen.generate.scheduler import LocalScheduler
from tracegen.jsonl import special_file_warning
from tracegen.llm.factory import open_pool
from tracegen.llm.pool import HostPool
from tracegen.modes import get_mode
from tracegen.problems import load_problems


def run_command(settings: RunSettings) -> int:
    """Run every episode not yet attempted; return the exit status."""
    return asyncio.run(_run(settings))


async def _run(settings: RunSettings) -> int:
    stats = RunStats()
    pool: HostPool | None = None
    reporter = Reporter(
        stats, lambda: pool.in_flight if pool else 0, display=Reporter.choose(settings.quiet)
    )
    get_mode(settings.mode)
    system_prompt = load_prompt(settings.mode, settings.prompts_dir)
    problems = load_problems(
        settings.problems, limit=settings.limit, problem_ids=settings.problem_ids
    )
    generation = settings.generation()
    plan = Plan(problems, generation, system_prompt, settings.num_samples, settings.seed)
    files = RunFiles(
        settings.output,
        settings.rejects,
        settings_hash=plan.settings_hash,
        settings=generation.record(system_prompt),
        overwrite=settings.overwrite,
        warn=reporter.warn,
    )
    for path in (settings.output, settings.rejects):
        if path is not None and (warning := special_file_warning(path)):
            reporter.warn(warning)
    try:
        stats.total = plan.count(files.done)
        stats.skipped = plan.size - stats.total
        if stats.total == 0:
            reporter.info(f"nothing to do: all {plan.size} episodes were already run")
            return 0
        pool = await open_pool(settings, on_retry=reporter.retry, warn=reporter.warn)
        try:
            return await LocalScheduler(settings, plan, files, pool, stats, reporter).execute()
        finally:
            await pool.aclose()
    finally:
        files.close()
