"""Mode fixtures: scripted episodes against the loopback Ollama server and a real sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fake_ollama import FakeOllama, Reply
from tracegen.config import GenerationSettings
from tracegen.data.prompts import load_prompt
from tracegen.episode.spec import EpisodeSpec
from tracegen.llm.ollama import OllamaBackend
from tracegen.modes import get_mode
from tracegen.sandbox import Sandbox
from tracegen.schema import Problem, TestCase, Trace

ADD = Problem(
    id="add",
    prompt="Write `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    tests=[
        TestCase(name="small", kind="io", args=[1, 2], expected=3),
        TestCase(name="negative", kind="io", args=[-4, 1], expected=-3),
    ],
)
TWICE = Problem(
    id="gsm-twice",
    prompt="Ann has 9 apples and Bob has twice as many. How many apples does Bob have?",
    kind="math",
    tests=[TestCase(name="answer", kind="answer", expected="18")],
)
RIGHT = "def add(a, b):\n    return a + b"
WRONG = "def add(a, b):\n    return a - b"
WRONG_FEEDBACK = (
    "<error>\n0/2 tests passed.\n"
    "- add(1, 2): expected 3, got -1\n"
    "- add(-4, 1): expected -3, got -5\n</error>"
)


@dataclass
class Episodes:
    """Runs one episode of a mode against the scripted server; reads what was sent."""

    fake: FakeOllama
    backend: OllamaBackend
    sandbox: Sandbox

    async def run(
        self, mode: str, *replies: Reply | str, problem: Problem = ADD, **settings: Any
    ) -> Trace:
        self.fake.script(*replies)
        generation = GenerationSettings(mode=mode, model="test-model", **settings)
        prompt = load_prompt(mode, generation.prompts_dir)
        spec = EpisodeSpec(
            problem=problem,
            sample=0,
            trace_id="trace-1",
            settings=generation,
            settings_hash=generation.digest(prompt),
            system_prompt=prompt,
            seed=7,
        )
        return await get_mode(mode).run(spec, self.backend, self.sandbox)

    def bodies(self) -> list[dict[str, Any]]:
        """The bodies of the generation requests, in order (render-only ones left out)."""
        return [
            body
            for path, body, _ in self.fake.requests
            if path in ("/api/chat", "/api/generate") and not body.get("_debug_render_only")
        ]

    def sent(self, request: int) -> list[tuple[str, str]]:
        """``(role, content)`` of the messages of generation request number ``request``."""
        return [(m["role"], m.get("content", "")) for m in self.bodies()[request]["messages"]]


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(isolation="rlimit") as box:
        yield box


@pytest.fixture
async def backend(fake_ollama: FakeOllama) -> AsyncIterator[OllamaBackend]:
    async with OllamaBackend(
        fake_ollama.url, "test-model", max_attempts=2, retry_initial_s=0.01, retry_max_s=0.02
    ) as client:
        yield client


@pytest.fixture
def episodes(fake_ollama: FakeOllama, backend: OllamaBackend, sandbox: Sandbox) -> Episodes:
    return Episodes(fake_ollama, backend, sandbox)
