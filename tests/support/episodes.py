"""Scripted episodes of the modes: two problems, right and wrong programs, the replies that
call the python tool, and `Episodes`, which runs one mode against the loopback Ollama server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tests.support.fake_ollama import FakeOllama, Reply
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
FINAL = f"\n<code>\n{RIGHT}\n</code>"


def call(code: str) -> str:
    """An inline-tools call of the python tool on ``code``."""
    payload = orjson.dumps({"name": "python", "arguments": {"code": code}}).decode()
    return f"<tool_call>{payload}</tool_call>"


def native_call(code: str, name: str = "python") -> Reply:
    """A native-tools reply calling tool ``name`` on ``code``."""
    return Reply(tool_calls=[{"function": {"name": name, "arguments": {"code": code}}}])


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
        generation = GenerationSettings(**{"mode": mode, "model": "test-model", **settings})
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
