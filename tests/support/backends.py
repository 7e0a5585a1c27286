"""Every backend tracegen has, each against a loopback stand-in of its server, by name (the
embedded one against the llama.cpp stand-in as its engine).

`serve(name)` starts the stand-in and yields a `Served`: the scripted model (`FakeModel`: script,
faults, recorded requests and prompts) and a backend talking to it. Adding a backend to the
shared contract test is one entry in `BACKENDS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from tests.support.fake_model import FakeModel
from tests.support.fake_ollama import FakeOllama
from tests.support.fake_openai import FakeOpenAI
from tests.support.in_process import InProcessTransport
from tests.support.local_engine import scripted_local
from tracegen.llm.base import HostBackend
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.openai import OpenAIBackend

GENERATION_PATHS = ("/api/chat", "/api/generate", "/v1/chat/completions", "/completion")
"""The paths where a model generates (the ones faults apply to)."""
QUICK_RETRIES = {"max_attempts": 3, "retry_initial_s": 0.001, "retry_max_s": 0.01}


@dataclass
class Served:
    """A backend and the stand-in it talks to."""

    name: str
    model: FakeModel
    backend: HostBackend

    def generations(self) -> list[dict[str, Any]]:
        """The bodies of the generation requests, in order."""
        return [body for path, body, _ in self.model.requests if path in GENERATION_PATHS]


def _ollama(**options: Any) -> tuple[FakeModel, Callable[[FakeModel], HostBackend]]:
    return FakeOllama(), lambda m: OllamaBackend(m.url, "test-model", **options)


def _ollama_in_process(
    **options: Any,
) -> tuple[FakeModel, Callable[[FakeModel], HostBackend]]:
    """Ollama's wire code against the stand-in's handler, called in process (no socket)."""
    return FakeOllama(), lambda m: OllamaBackend(
        "http://in-process", "test-model", transport=InProcessTransport(m), **options
    )


def _local(**options: Any) -> tuple[FakeModel, Callable[[FakeModel], HostBackend]]:
    """The embedded backend over a scripted llama.cpp (`tests.support.local_engine`)."""
    return FakeOpenAI("llamacpp"), scripted_local


def _openai(flavor: str) -> Callable[..., tuple[FakeModel, Callable[[FakeModel], HostBackend]]]:
    def make(**options: Any) -> tuple[FakeModel, Callable[[FakeModel], HostBackend]]:
        return FakeOpenAI(flavor), lambda m: OpenAIBackend(f"{m.url}/v1", "test-model", **options)

    return make


BACKENDS: dict[str, Callable[..., tuple[FakeModel, Callable[[FakeModel], HostBackend]]]] = {
    "ollama": _ollama,
    "ollama-in-process": _ollama_in_process,
    "vllm": _openai("vllm"),
    "sglang": _openai("sglang"),
    "llamacpp": _openai("llamacpp"),
    "lmstudio": _openai("lmstudio"),
    "local": _local,
}
IN_PROCESS = {"local"}
"""Backends with no wire to the model: HTTP statuses and transport faults cannot happen."""


@contextlib.asynccontextmanager
async def serve(name: str, **options: Any) -> AsyncIterator[Served]:
    """The stand-in for backend ``name``, started, and a backend knowing who answers there."""
    model, connect = BACKENDS[name](**{**QUICK_RETRIES, **options})
    with model:
        backend = connect(model)
        try:
            await backend.server_info()
            model.requests.clear()
            yield Served(name, model, backend)
        finally:
            await backend.aclose()
