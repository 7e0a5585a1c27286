"""`tracegen run`: plan the episodes, open the run files and the model servers, execute."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from tracegen.config import RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.errors import ConfigError
from tracegen.generate.executor import Executor
from tracegen.generate.first_run import first_run, starts_small
from tracegen.generate.plan import Plan
from tracegen.generate.progress import Reporter, RunStats
from tracegen.generate.runfiles import RunFiles
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
from tracegen.llm.factory import choose_backend, local_backend, open_pool
from tracegen.llm.pool import HostPool
from tracegen.modes import get_mode
from tracegen.parsing.tool_parsers import choose_parser
from tracegen.problems import load_problems

if TYPE_CHECKING:
    from tracegen.llm.local import LocalBackend


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
    get_mode(settings.mode)  # an unknown mode is refused before any server is asked
    executor = executor_class(settings.executor)
    load_prompt(settings.mode, settings.prompts_dir)
    problems = load_problems(
        settings.problems, limit=settings.limit, problem_ids=settings.problem_ids
    )
    settings = await choose_backend(settings, reporter.info)
    if starts_small(settings):
        settings, said = first_run(settings)
        problems = load_problems(settings.problems, limit=settings.limit)
        reporter.info(said)
    mode = get_mode(settings.mode)
    system_prompt = load_prompt(settings.mode, settings.prompts_dir)
    runs_in_process(settings, executor)
    settings = constrained(settings, mode.constrain_auto)
    local = local_backend(settings) if settings.backend == "local" else None
    if mode.reads_tool_calls:
        settings = with_tool_parser(settings, local, reporter.info)
    generation = settings.generation()
    plan = Plan(problems, generation, system_prompt, settings.num_samples, settings.seed)
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
        settings=generation.record(system_prompt),
        overwrite=settings.overwrite,
        warn=reporter.warn,
        plan=shard[1].fingerprint(shard[0].index) if shard is not None else None,
    )
    status = 0
    try:
        stats.total = plan.count(files.done)
        stats.skipped = plan.size - stats.total
        if stats.total == 0:
            reporter.info(f"nothing to do: all {plan.size} episodes were already run")
        else:
            if shard is not None:
                unmark_done(output)
            if local is not None:
                reporter.info(local.describe(constrained=settings.constrain == "on"))
            pool = await open_pool(
                settings,
                on_retry=reporter.retry,
                warn=reporter.warn,
                continues_message=mode.continues_message,
                local=local,
            )
            if local is not None:
                reporter.info(f"local: model loaded in {local.load_s:.1f}s")
            if pool.kind is not None:  # what --backend auto found: workers elsewhere use it
                settings = settings.model_copy(update={"backend": pool.kind})
            try:
                status = await executor(settings, plan, files, pool, stats, reporter).execute()
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


def with_tool_parser(
    settings: RunSettings, local: LocalBackend | None, say: Callable[[str], None]
) -> RunSettings:
    """``settings`` with the family parser ``--tool-parser`` (auto: the embedded model's chat
    template, else the model's name) chose, said in the run's header."""
    template = local.local.template or local.local.info.chat_template if local else None
    choice = choose_parser(settings.tool_parser, template, settings.model)
    say(f"tool parser: {choice.describe()}")
    return settings.model_copy(update={"tool_parser_chosen": choice.parser})


def constrained(settings: RunSettings, measured: bool) -> RunSettings:
    """``settings`` with ``constrain`` decided: ``auto`` constrains a mode on the embedded
    model where the measured table (docs/backends.md, The local backend) says it helps
    (``measured``)."""
    on = settings.constrain == "on" or (
        settings.constrain == "auto" and settings.backend == "local" and measured
    )
    return settings.model_copy(update={"constrain": "on" if on else "off"})


def runs_in_process(settings: RunSettings, executor: type[Executor]) -> None:
    """A `ConfigError` when the embedded model would have to serve episodes run elsewhere."""
    if settings.backend == "local" and not executor.in_process:
        raise ConfigError(
            f"--executor {settings.executor} runs episodes in other processes, which cannot "
            "use the model --backend local runs in this one: give --host a model server "
            "(Ollama, vLLM, SGLang, llama.cpp's server) or use --executor local"
        )
