"""The embedded backend's own code over a scripted llama.cpp: no model, no native engine.

`scripted_local(fake)` is a `LocalBackend` whose engine is the llama.cpp stand-in
(`tests.support.fake_openai`, flavour ``llamacpp``): prompts are rendered and tokenized by its
``/apply-template`` and ``/tokenize``, and each completion is its ``/completion`` answer,
streamed back a token at a time as ``xllamacpp.Server.handle_completions`` streams one
(``choices[0].text``, logprobs with token ids, ``finish_reason``, ``timings``). What is left
to the backend is what it does itself: the chat template's prompt ids, stop strings, token ids,
continuation, errors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.support.fake_model import FakeModel
from tracegen.llm.gguf import GgufInfo
from tracegen.llm.local import Engine, LocalBackend
from tracegen.llm.packaged import LocalModel

MODEL = LocalModel(
    name="test-model",
    summary="scripted",
    info=GgufInfo(
        path=Path("scripted.gguf"),
        size_bytes=0,
        architecture="llama",
        name="test-model",
        context_length=4096,
        chat_template="{{ chatml }}",
        layers=1,
        kv_heads=1,
        head_dim=1,
    ),
    template=None,
    template_source="the file",
)
_FINISH = {"limit": "length", "word": "stop", "eos": "stop"}


class ScriptedEngine:
    """``handle_completions`` answered by the stand-in's ``/completion``."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def handle_completions(
        self, body: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool] | None = None
    ) -> Any:
        assert on_chunk is not None, "the backend streams"
        native = {"prompt": body["prompt"], "n_probs": body.get("logprobs", 0)}
        for field, native_field in (("max_tokens", "n_predict"), ("grammar", "grammar")):
            if body.get(field) is not None:
                native[native_field] = body[field]
        response = self.client.post("/completion", json=native)
        if response.status_code != 200:
            raise ValueError(response.json()["error"]["message"])
        answer = response.json()
        # Streamed back a token at a time, as llama.cpp's server streams a completion.
        for entry in answer.get("completion_probabilities") or []:
            if on_chunk(_streamed(entry["token"], [entry], None, None)):
                return None
        on_chunk(_streamed("", [], _FINISH[answer["stop_type"]], answer.get("timings")))
        return None


def _streamed(
    text: str, entries: list[dict[str, Any]], finish: str | None, timings: Any
) -> dict[str, Any]:
    """One chunk as ``handle_completions`` streams it."""
    content = [{**e, "top_logprobs": e.get("top_logprobs", [])} for e in entries]
    choice = {"index": 0, "text": text, "logprobs": {"content": content}, "finish_reason": finish}
    streamed: dict[str, Any] = {"choices": [choice]}
    if timings:
        streamed["timings"] = timings
    return streamed


class _ScriptedLocal(LocalBackend):
    def __init__(self, fake: FakeModel) -> None:
        super().__init__(MODEL, context_tokens=4096, slots=2, threads=1)
        self.fake = fake
        self._load()

    def _start_engine(self) -> tuple[Engine, httpx.Client]:
        client = httpx.Client(base_url=self.fake.url, timeout=30.0)
        return ScriptedEngine(client), client


def scripted_local(fake: FakeModel) -> LocalBackend:
    """A loaded `LocalBackend` whose engine is ``fake`` (see the module docstring)."""
    return _ScriptedLocal(fake)
