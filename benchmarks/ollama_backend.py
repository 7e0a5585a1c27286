"""Throughput of `OllamaBackend` against the loopback server: how much the client itself costs.

Run: ``python benchmarks/ollama_backend.py``. The server answers at once, so the numbers are the
ceiling of one tracegen process (NDJSON parsing, logprobs, pydantic), not of a model.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_ollama import FakeOllama, Reply, tokenize

from tracegen.llm.base import ChatRequest
from tracegen.llm.ollama import OllamaBackend
from tracegen.schema import ChatMessage

ANSWER = "def add(a, b):\n    return a + b\n" * 25
REQUESTS = 200


async def measure(server: FakeOllama, concurrency: int, top_logprobs: int) -> tuple[float, float]:
    request = ChatRequest(
        messages=[ChatMessage(role="user", content="write add")], top_logprobs=top_logprobs
    )
    gate = asyncio.Semaphore(concurrency)
    async with OllamaBackend(server.url, "test-model") as backend:

        async def one() -> None:
            async with gate:
                await backend.chat(request)

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(REQUESTS)))
        elapsed = time.perf_counter() - start
    chunks = REQUESTS * (len(tokenize(ANSWER)) + 1)
    return REQUESTS / elapsed, chunks / elapsed


def main() -> None:
    table = Table(
        title=f"OllamaBackend.chat, {REQUESTS} requests of {len(tokenize(ANSWER))} chunks"
    )
    for column in ("concurrency", "top_logprobs", "requests/s", "chunks/s"):
        table.add_column(column, justify="right")
    with FakeOllama() as server:
        server.set_responder(lambda path, body: Reply(content=ANSWER))
        for concurrency in (1, 4, 16):
            for top in (0, 5):
                rps, cps = asyncio.run(measure(server, concurrency, top))
                table.add_row(str(concurrency), str(top), f"{rps:.1f}", f"{cps:,.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
