"""Mode fixtures: scripted episodes against the loopback Ollama server and a real sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.episodes import Episodes
from tests.support.fake_ollama import FakeOllama
from tests.support.in_process import InProcessTransport
from tracegen.llm.ollama import OllamaBackend
from tracegen.sandbox import Sandbox


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(isolation="rlimit") as box:
        yield box


@pytest.fixture
async def backend(fake_ollama: FakeOllama) -> AsyncIterator[OllamaBackend]:
    """Ollama's wire code against the scripted server's handler, in process: no socket."""
    async with OllamaBackend(
        fake_ollama.url,
        "test-model",
        max_attempts=2,
        retry_initial_s=0.01,
        retry_max_s=0.02,
        transport=InProcessTransport(fake_ollama),
    ) as client:
        yield client


@pytest.fixture
def episodes(fake_ollama: FakeOllama, backend: OllamaBackend, sandbox: Sandbox) -> Episodes:
    return Episodes(fake_ollama, backend, sandbox)
