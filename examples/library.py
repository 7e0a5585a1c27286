"""tracegen as a library: the same functions the command line calls.

Checks three built-in reference solutions in the sandbox, runs one episode by hand (the way
every executor and RL environment runs one: the run decided by `prepare`, the episode run by
an `EpisodeWorker`), generates traces for the same problems with a model, and summarises them.

    python examples/library.py --host http://localhost:11434 --model qwen3:8b
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tracegen.config import RunSettings, load_settings
from tracegen.generate.run import run_command
from tracegen.generate.setup import prepare
from tracegen.generate.worker import EpisodeWorker
from tracegen.llm.factory import backend_for
from tracegen.problems import load_problems
from tracegen.schema import Problem, Trace
from tracegen.views.stats import collect


async def check_references(settings: RunSettings, problems: list[Problem]) -> None:
    async with EpisodeWorker(settings) as worker:
        for problem in problems:
            result = await worker.runner.run_tests(problem.reference_solution or "", problem)
            print(f"reference {problem.id}: {result.status} ({result.passed}/{result.total})")


async def one_episode(settings: RunSettings) -> Trace:
    setup = await prepare(settings, print)
    spec = next(setup.plan.specs(set()))
    backend = backend_for(setup.settings, settings.hosts[0], kind="ollama")
    try:
        async with EpisodeWorker(setup.settings, backend) as worker:
            return await worker.run(spec)
    finally:
        await backend.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="http://localhost:11434")
    parser.add_argument("--model", default="qwen3:8b")
    parser.add_argument("--output", type=Path, default=Path("library-traces.jsonl"))
    args = parser.parse_args()

    flags = {"hosts": [args.host], "model": args.model, "mode": "markers", "limit": 3}
    settings = load_settings(RunSettings, flags | {"output": args.output, "quiet": True})
    asyncio.run(check_references(settings, load_problems("builtin", limit=3)))
    trace = asyncio.run(one_episode(settings))
    print(f"episode {trace.problem_id}: success {trace.success}")
    status = run_command(settings)

    summary = collect([args.output]).to_json()
    print(f"traces: {summary['traces']}, successful: {summary['success']}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
