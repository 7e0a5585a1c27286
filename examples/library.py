"""tracegen as a library: the same functions the command line calls.

Checks three built-in reference solutions in the sandbox, runs one episode by hand (the way
every executor runs one: `run_episode` with the mode the settings name), generates traces
for the same problems with a model, and summarises them.

    python examples/library.py --host http://localhost:11434 --model qwen3:8b
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tracegen.config import RunSettings, load_settings
from tracegen.data.prompts import load_prompt
from tracegen.episode.engine import run_episode
from tracegen.generate.command import run_command
from tracegen.generate.plan import Plan
from tracegen.llm.factory import backend_for
from tracegen.modes import get_mode
from tracegen.problems import load_problems
from tracegen.sandbox import Sandbox
from tracegen.schema import Problem, Trace
from tracegen.views.stats import collect


async def check_references(problems: list[Problem]) -> None:
    async with Sandbox() as sandbox:
        for problem in problems:
            result = await sandbox.run_tests(problem.reference_solution or "", problem)
            print(f"reference {problem.id}: {result.status} ({result.passed}/{result.total})")


async def one_episode(settings: RunSettings, problem: Problem) -> Trace:
    generation = settings.generation()
    [spec] = Plan([problem], generation, load_prompt(generation.mode), 1, None).specs(set())
    backend = backend_for(settings, settings.hosts[0], kind="ollama")
    try:
        async with Sandbox() as sandbox:
            return await run_episode(spec, get_mode(generation.mode), backend, sandbox)
    finally:
        await backend.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="http://localhost:11434")
    parser.add_argument("--model", default="qwen3:8b")
    parser.add_argument("--output", type=Path, default=Path("library-traces.jsonl"))
    args = parser.parse_args()

    problems = load_problems("builtin", limit=3)
    asyncio.run(check_references(problems))

    flags = {"hosts": [args.host], "model": args.model, "mode": "markers", "limit": 3}
    settings = load_settings(RunSettings, flags | {"output": args.output, "quiet": True})
    trace = asyncio.run(one_episode(settings, problems[0]))
    print(f"episode {trace.problem_id}: success {trace.success}")
    status = run_command(settings)

    summary = collect([args.output]).to_json()
    print(f"traces: {summary['traces']}, successful: {summary['success']}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
