"""`tracegen run`: plan the episodes, open the run files and the model servers, schedule."""

from __future__ import annotations

import asyncio

from tracegen.config import RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.errors import ConfigError
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
from tracegen.generate.scheduler import LocalScheduler
from tracegen.llm.factory import CAPABILITIES, choose_backend, local_backend, open_pool
from tracegen.llm.local import LocalBackend
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
    settings = constrained(await choose_backend(settings, reporter.info))
    local = local_backend(settings) if settings.backend == "local" else None
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
    try:
        stats.total = plan.count(files.done)
        stats.skipped = plan.size - stats.total
        if stats.total == 0:
            reporter.info(f"nothing to do: all {plan.size} episodes were already run")
            if local is not None:
                await local.aclose()
            return 0
        if local is not None:
            reporter.info(describe(local, settings))
        pool = await open_pool(settings, on_retry=reporter.retry, warn=reporter.warn, local=local)
        if local is not None:
            reporter.info(f"local: model loaded in {local.load_s:.1f}s")
        try:
            return await LocalScheduler(settings, plan, files, pool, stats, reporter).execute()
        finally:
            await pool.aclose()
    finally:
        files.close()


def constrained(settings: RunSettings) -> RunSettings:
    """``settings`` with ``constrain`` decided: ``auto`` constrains the modes whose measured
    table says it helps, on a backend that takes a grammar (the embedded model)."""
    mode = get_mode(settings.mode)
    can = CAPABILITIES[settings.backend].grammar
    if settings.constrain == "on" and not can:
        raise ConfigError(
            f"--constrain on needs a backend that takes a grammar (local); "
            f"{settings.backend} does not"
        )
    on = settings.constrain == "on" or (
        settings.constrain == "auto" and can and settings.backend == "local" and mode.constrain_auto
    )
    return settings.model_copy(update={"constrain": "on" if on else "off"})


def describe(local: LocalBackend, settings: RunSettings) -> str:
    """The line that says what the embedded backend loads and how it runs requests."""
    m = local.local
    grammar = "constrained to the mode's grammar" if settings.constrain == "on" else "unconstrained"
    return (
        f"local: loading {m.name} ({m.summary}; chat template from {m.template_source}) · "
        f"{local.slots} slot(s) of {local.context_tokens} tokens · "
        f"{local.threads} thread(s) · {grammar}"
    )
