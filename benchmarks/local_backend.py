"""The embedded backend: its speed against llama.cpp called directly, and what its models write.

Run: ``python benchmarks/local_backend.py`` (needs the ``local`` extra and a packaged model).

1. **Speed.** The same prompts, in the same run, alternately through `LocalBackend.chat` (chat
   template, tokenizing, worker thread, stop handling, logprobs with ids) and straight into the
   loaded ``xllamacpp.Server`` with the prompt's token ids (``handle_completions``). Prompt
   tokens/s: requests of one token on long prompts no slot has cached. Generation tokens/s:
   requests of up to ``--gen-tokens`` tokens on a short prompt (a problem statement alone),
   tokens generated over the whole request. Both are wall clock seen by the caller, at
   temperature 0; the median of ``--repeat`` rounds.
2. **Quality.** Per packaged model installed, per mode, unconstrained and constrained to the
   mode's grammar: the first ``--problems`` built-in problems, one episode each; the share of
   episodes whose code was executed (a tool call or test run during the episode, or a final
   program extracted and graded) and the success rate.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracegen.config import GenerationSettings
from tracegen.data.prompts import load_prompt, task_message
from tracegen.episode.engine import run_episode
from tracegen.generate.plan import Plan
from tracegen.jsonl import JsonlWriter
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import PACKAGED, find_model
from tracegen.modes import get_mode
from tracegen.problems import load_problems
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.schema import ChatMessage, Trace

MODES = ("markers", "tool-feedback", "inline-tools")


def _messages(problem_prompt: str, tag: str, system: bool) -> list[ChatMessage]:
    """The problem, marked with ``tag`` so that no slot has the prompt cached."""
    user = ChatMessage(role="user", content=f"({tag}) {problem_prompt}")
    if not system:
        return [user]
    return [ChatMessage(role="system", content=load_prompt("tool-feedback")), user]


async def speed(
    backend: LocalBackend, repeat: int, gen_tokens: int
) -> list[tuple[str, float, float]]:
    """(phase, backend tokens/s, direct tokens/s) for prompt processing and generation."""
    problems = load_problems("builtin")
    rates: dict[tuple[str, str], list[float]] = {}

    async def one(phase: str, path: str, round_: int) -> None:
        prompt = phase == "prompt"
        problem = task_message(problems[round_ % len(problems)])
        messages = _messages(problem, f"{path[0]}{round_}", prompt)
        max_tokens = 1 if prompt else gen_tokens
        if path == "backend":
            options = SamplingOptions(max_tokens=max_tokens, temperature=0.0)
            started = time.perf_counter()
            completion = await backend.chat(ChatRequest(messages=messages, options=options))
            seconds = time.perf_counter() - started
            count = completion.prompt_tokens if prompt else completion.completion_tokens
        else:
            ids = await backend.prompt_ids(messages)  # not timed: the engine takes ids
            body = {"prompt": ids, "max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1}
            started = time.perf_counter()
            engine = backend.engine
            assert engine is not None, "the backend is loaded"
            answer = await asyncio.to_thread(engine.handle_completions, body)
            seconds = time.perf_counter() - started
            count = len(ids) if prompt else answer["usage"]["completion_tokens"]
        rates.setdefault((phase, path), []).append(count / seconds)

    for round_ in range(repeat):
        for phase in ("prompt", "generation"):
            paths = ("backend", "direct") if round_ % 2 else ("direct", "backend")
            for path in paths:
                await one(phase, path, round_)
    return [
        (
            phase,
            statistics.median(rates[phase, "backend"]),
            statistics.median(rates[phase, "direct"]),
        )
        for phase in ("prompt", "generation")
    ]


def executed(trace: Trace) -> bool:
    return trace.metrics.executions > 0 or trace.verdict is not None


async def quality(
    backend: LocalBackend,
    mode: str,
    constrain: str,
    problems: int,
    max_tokens: int,
    save: Path | None = None,
) -> tuple[float, float, float]:
    """(share with executed code, success rate, seconds) over the first ``problems``."""
    settings = GenerationSettings(
        mode=mode,
        model=backend.model,
        max_tokens=max_tokens,
        max_iterations=2,
        max_steps=6,
        constrain=constrain,  # type: ignore[arg-type]
        seed=1,
    )
    prompt = load_prompt(mode)
    plan = Plan(load_problems("builtin", limit=problems), settings, prompt, 1, 1)
    gate = asyncio.Semaphore(backend.slots)
    started = time.perf_counter()
    async with Sandbox(limits=SandboxLimits.for_timeout(5.0)) as sandbox:

        async def one(spec: Any) -> Trace:
            async with gate:
                return await run_episode(spec, get_mode(spec.settings.mode), backend, sandbox)

        traces = await asyncio.gather(*(one(s) for s in plan.specs(set())))
    if save is not None:
        writer = JsonlWriter(save / f"{backend.model}.{mode}.{constrain}.jsonl")
        for trace in traces:
            writer.write(trace)
        writer.close()
    n = len(traces)
    return (
        sum(map(executed, traces)) / n,
        sum(t.success for t in traces) / n,
        time.perf_counter() - started,
    )


async def main(args: argparse.Namespace) -> None:
    console = Console()
    installed = []
    for name in args.models.split(","):
        try:
            installed.append(find_model(name))
        except Exception as e:  # a model not installed is skipped, and said
            console.print(f"skipping {name}: {e}")
    for model in installed:
        backend = LocalBackend(model, context_tokens=4096, slots=args.slots, threads=args.threads)
        await backend.open()
        try:
            if not args.skip_speed:
                table = Table(title=f"{model.name}: tokens/s, median of {args.repeat} rounds")
                for column in ("phase", "LocalBackend", "xllamacpp direct", "ratio"):
                    table.add_column(column, justify="right")
                for kind, ours, direct in await speed(backend, args.repeat, args.gen_tokens):
                    table.add_row(kind, f"{ours:.1f}", f"{direct:.1f}", f"{ours / direct:.2f}")
                console.print(table)
            if args.problems < 1:  # the speed only
                continue
            table = Table(
                title=f"{model.name}: {args.problems} built-in problems per cell, "
                f"max_tokens {args.max_tokens}"
            )
            for column in ("mode", "grammar", "code executed", "success", "time"):
                table.add_column(column, justify="right")
            modes = args.modes.split(",")
            for mode in modes:
                for constrain in args.grammar.split(","):
                    ran, ok, seconds = await quality(
                        backend, mode, constrain, args.problems, args.max_tokens, args.save
                    )
                    row = (mode, constrain, f"{ran:.0%}", f"{ok:.0%}", f"{seconds:.0f}s")
                    console.print(" · ".join(row))  # as it comes: a cell takes minutes
                    table.add_row(*row)
            console.print(table)
        finally:
            await backend.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gen-tokens", type=int, default=96)
    parser.add_argument("--problems", type=int, default=4, help="0: the speed only")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--models", default=",".join(PACKAGED))
    parser.add_argument("--grammar", default="off,on", help="off, on or both")
    parser.add_argument("--save", type=Path, help="write each cell's traces to this folder")
    asyncio.run(main(parser.parse_args()))
