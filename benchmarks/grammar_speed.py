"""Constrained decoding's speed: tokens/s under each protocol grammar against unconstrained
decoding, the same prompts side by side, on the embedded model.

Run: ``python benchmarks/grammar_speed.py`` (needs the ``local`` extra and a packaged model).

For every grammar in `tracegen.modes.grammars.GRAMMARS`, the prompts its mode sends (the
mode's system prompt and one built-in problem per slot; the inline-tools grammars that go on
after a tool call continue an assistant message ending in a tool call and its response) are
sent ``--slots`` at a time, as a run's episodes are, once unconstrained and once constrained,
in alternating order each round. Every prompt is processed once before the rounds, so the
times are generation alone. Per configuration: tokens/s over the batch (wall clock), CPU
milliseconds per token (every thread of this process: llama.cpp's and Python's), and the
median and longest wait between two tokens of one request. When the token the model prefers
breaks the grammar, llama.cpp's sampler checks the whole vocabulary against it and samples
again: that shows as a slower token.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracegen.data.prompts import load_prompt, task_message
from tracegen.llm.grammar import Grammar
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import DEFAULT_MODEL, find_model
from tracegen.modes.grammars import GRAMMARS
from tracegen.problems import load_problems
from tracegen.schema import ChatMessage

MODE = {
    "markers": "markers",
    "one-step": "forced-interleave",
    "think-code": "tool-feedback",
    "plan-code": "structured",
    "reflection": "structured",
    "inline-tools": "inline-tools",
    "inline-tools/continue": "inline-tools",
    "inline-tools/finish": "inline-tools",
}
"""The mode whose prompt each grammar is measured with."""

AFTER_CALL = (
    "<think>Let me run it on the example first.\n"
    '<tool_call>{"name": "python", "arguments": {"code": "print(sorted([3, 1, 2]))"}}'
    "</tool_call>\n"
    '<tool_response>{"status":"ok","exit_code":0,"stdout":"[1, 2, 3]\\n","stderr":""}'
    "</tool_response>\n"
)
"""Where the grammars used after a tool call take over: an open think, a call, its response."""


@dataclass
class Batch:
    """What one configuration's requests took, summed over the rounds."""

    tokens: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    gaps: list[float] = field(default_factory=list)

    def add(self, other: Batch) -> None:
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.cpu_seconds += other.cpu_seconds
        self.gaps += other.gaps

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.cpu_seconds / self.tokens if self.tokens else 0.0


async def prompts(backend: LocalBackend, grammar: str, slots: int) -> list[list[int]]:
    """The token ids of the ``slots`` prompts ``grammar`` is measured with."""
    system = load_prompt(MODE[grammar])
    out = []
    for problem in load_problems("builtin", limit=slots):
        messages = [
            ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=task_message(problem)),
        ]
        if grammar.startswith("inline-tools/"):
            messages.append(ChatMessage(role="assistant", content=AFTER_CALL))
        out.append(await backend.prompt_ids(messages))
    return out


def complete(backend: LocalBackend, body: dict[str, Any]) -> tuple[int, list[float]]:
    """One streamed completion straight from the engine: its tokens and the wait for each."""
    engine = backend.engine
    assert engine is not None, "the backend is loaded"
    times: list[float] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        content = ((chunk.get("choices") or [{}])[0].get("logprobs") or {}).get("content")
        times.extend(time.perf_counter() for _ in content or ())
        return False

    engine.handle_completions(body, on_chunk)
    return len(times), [b - a for a, b in itertools.pairwise(times)]


async def batch(
    backend: LocalBackend, ids: list[list[int]], grammar: Grammar | None, args: argparse.Namespace
) -> Batch:
    """Every prompt at once, ``max_tokens`` each, as a run's episodes send them."""
    bodies = []
    for prompt in ids:
        body: dict[str, Any] = {
            "prompt": prompt,
            "stream": True,
            "max_tokens": args.tokens,
            "logprobs": 1,
            "cache_prompt": True,
            "temperature": args.temperature,
            "seed": args.seed,
        }
        if grammar is not None:
            body["grammar"] = grammar.gbnf
        bodies.append(body)
    cpu, started = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(asyncio.to_thread(complete, backend, b) for b in bodies))
    out = Batch(seconds=time.perf_counter() - started, cpu_seconds=time.process_time() - cpu)
    for tokens, gaps in results:
        out.tokens += tokens
        out.gaps += gaps
    return out


async def measure(
    backend: LocalBackend, name: str, args: argparse.Namespace
) -> tuple[Batch, Batch]:
    """(unconstrained, constrained) for grammar ``name``, summed over ``--rounds``."""
    ids = await prompts(backend, name, args.slots)
    warm = [{"prompt": p, "max_tokens": 1, "cache_prompt": True} for p in ids]
    engine = backend.engine
    assert engine is not None, "the backend is loaded"
    await asyncio.gather(*(asyncio.to_thread(engine.handle_completions, w) for w in warm))
    off, on = Batch(), Batch()
    for round_ in range(args.rounds):
        order = ((off, None), (on, GRAMMARS[name]))
        for total, grammar in order if round_ % 2 == 0 else reversed(order):
            total.add(await batch(backend, ids, grammar, args))
    return off, on


def _ms(seconds: list[float], pick: Any) -> str:
    return f"{1000 * pick(seconds):.0f}" if seconds else "-"


async def main(args: argparse.Namespace) -> None:
    console = Console(width=150)
    backend = LocalBackend(
        find_model(args.model), context_tokens=4096, slots=args.slots, threads=args.threads
    )
    await backend.open()
    table = Table(
        title=f"{args.model}: {args.slots} request(s) at a time, up to {args.tokens} tokens each, "
        f"{args.rounds} round(s), temperature {args.temperature}"
    )
    for column in (
        *("grammar", "tokens off / on", "tok/s off", "tok/s on", "on / off"),
        *("CPU ms/token off / on", "median ms off / on", "slowest ms off / on"),
    ):
        table.add_column(column, justify="right")
    try:
        for name in args.grammars.split(",") if args.grammars else GRAMMARS:
            off, on = await measure(backend, name, args)
            row = (
                name,
                f"{off.tokens} / {on.tokens}",
                f"{off.rate:.1f}",
                f"{on.rate:.1f}",
                f"{on.rate / off.rate:.2f}" if off.rate else "-",
                f"{off.cpu_ms:.0f} / {on.cpu_ms:.0f}",
                f"{_ms(off.gaps, statistics.median)} / {_ms(on.gaps, statistics.median)}",
                f"{_ms(off.gaps, max)} / {_ms(on.gaps, max)}",
            )
            console.print(" · ".join(row))  # as it comes
            table.add_row(*row)
    finally:
        await backend.aclose()
    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--grammars", default="", help="comma-separated names (default: all)")
    parser.add_argument("--slots", type=int, default=4, help="requests at a time (a run's 4)")
    parser.add_argument("--tokens", type=int, default=192, help="max_tokens of each request")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    asyncio.run(main(parser.parse_args()))
