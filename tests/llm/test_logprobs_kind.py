"""Which logprobs a trace holds: the model's (raw) or the sampler's (processed, asked with
``--logprobs processed`` where the backend gives them), and the sampler's settings."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.support.backends import QUICK_RETRIES
from tests.support.fake_model import Reply, logprob_entry
from tests.support.fake_openai import FakeOpenAI
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.openai import OpenAIBackend
from tracegen.schema import ChatMessage, Trace

TOOLS = [{"type": "function", "function": {"name": "python", "parameters": {}}}]


def request(processed: bool, **kw: Any) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage(role="user", content="write add")],
        options=SamplingOptions(temperature=0.5),
        top_logprobs=3,
        processed_logprobs=processed,
        **kw,
    )


def _expected(i: int) -> float:
    """The stand-in's post-sampling logprob of its i-th token (see `post_sampling`)."""
    entry = logprob_entry("x", i, 3)
    total = sum(math.exp(2 * a["logprob"]) for a in entry["top_logprobs"])
    return 2 * entry["logprob"] - math.log(total)


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["completion", "chat"])
async def test_llamacpp_is_asked_for_post_sampling_probabilities_and_they_read_as_logprobs(
    tools: list[dict[str, Any]] | None,
) -> None:
    with FakeOpenAI("llamacpp") as server:
        server.script(*[Reply(content="def add(a, b): return a + b")] * 2)
        async with OpenAIBackend(server.api, "test-model", **QUICK_RETRIES) as b:
            raw = await b.chat(request(False, tools=tools))
            processed = await b.chat(request(True, tools=tools))
        generation = [body for path, body, _ in server.requests if path.endswith("completion")]
        generation += [body for path, body, _ in server.requests if path.endswith("completions")]
    assert [bool(body.get("post_sampling_probs")) for body in generation] == [False, True]
    assert (raw.logprobs_kind, processed.logprobs_kind) == ("raw", "processed")
    assert raw.logprobs and processed.logprobs
    assert [t.logprob for t in raw.logprobs] == [
        logprob_entry("x", i, 3)["logprob"] for i in range(len(raw.logprobs))
    ]
    assert [t.logprob for t in processed.logprobs] == pytest.approx(
        [_expected(i) for i in range(len(processed.logprobs))]
    )
    assert [t.token for t in processed.logprobs] == [t.token for t in raw.logprobs]
    assert all(len(t.top_logprobs) == 3 for t in processed.logprobs)


@pytest.mark.parametrize("flavor", ["vllm", "sglang"])
async def test_a_server_that_does_not_say_gives_unknown_and_is_not_sent_llamacpps_field(
    flavor: str,
) -> None:
    with FakeOpenAI(flavor) as server:
        async with OpenAIBackend(server.api, "test-model", **QUICK_RETRIES) as b:
            completion = await b.chat(request(True))
        (body,) = [b for p, b, _ in server.requests if p == "/v1/chat/completions"]
    assert "post_sampling_probs" not in body
    assert completion.logprobs_kind == "unknown"


def test_the_kind_and_the_sampling_round_trip_and_old_traces_read_as_unknown() -> None:
    trace = Trace(
        id="t",
        problem_id="p",
        mode="markers",
        model="m",
        logprobs_kind="processed",
        sampling={"temperature": 0.7, "top_p": 0.95, "top_k": None},  # type: ignore[arg-type]
    )
    again = Trace.model_validate_json(trace.model_dump_json(by_alias=True))
    assert again.logprobs_kind == "processed" and again.sampling == trace.sampling
    assert again.sampling is not None and again.sampling.temperature == 0.7
    old = trace.to_json()
    del old["logprobs_kind"], old["sampling"]
    read = Trace.model_validate(old)
    assert (read.logprobs_kind, read.sampling) == ("unknown", None)


def test_raw_logprobs_keep_the_settings_hash_of_earlier_runs() -> None:
    from tracegen.config import GenerationSettings

    raw, processed = GenerationSettings(), GenerationSettings(logprobs="processed")
    assert "logprobs" not in raw.record("prompt")
    assert raw.digest("prompt") != processed.digest("prompt")


@pytest.mark.slow
async def test_llama_server_gives_the_samplers_logprobs_when_asked(llama_server: str) -> None:
    """SmolLM2-135M through llama.cpp's server at T=0.7: the same tokens sampled (the seed
    is the same), their logprobs those of the distribution sampled from."""
    from tests.support.llamacpp import MODEL

    def asked(processed: bool) -> ChatRequest:
        return ChatRequest(
            messages=[ChatMessage(role="user", content="Write a Python function that adds.")],
            options=SamplingOptions(temperature=0.7, seed=1, max_tokens=24),
            top_logprobs=5,
            processed_logprobs=processed,
        )

    async with OpenAIBackend(f"{llama_server}/v1", MODEL, timeout_s=600) as b:
        raw = await b.chat(asked(False))
        processed = await b.chat(asked(True))
    assert (raw.logprobs_kind, processed.logprobs_kind) == ("raw", "processed")
    assert raw.completion_ids == processed.completion_ids
    assert raw.logprobs and processed.logprobs
    assert len(raw.logprobs) == len(processed.logprobs)
    assert [t.id for t in raw.logprobs] == [t.id for t in processed.logprobs]
    assert any(
        abs(a.logprob - b.logprob) > 1e-3
        for a, b in zip(raw.logprobs, processed.logprobs, strict=True)
    )
    for token in processed.logprobs:
        assert token.logprob <= 0.0
        assert sum(math.exp(t.logprob) for t in token.top_logprobs) <= 1.0 + 1e-4


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("processed_logprobs", "processed"),
        ("raw_logprobs", "raw"),
        ("raw_logits", "unknown"),
        (None, "unknown"),
    ],
)
async def test_vllm_says_its_logprobs_mode_where_it_shows_it(mode: str | None, kind: str) -> None:
    with FakeOpenAI("vllm", logprobs_mode=mode) as server:
        async with OpenAIBackend(server.api, "test-model", **QUICK_RETRIES) as b:
            first = await b.chat(request(False))
            second = await b.chat(request(True))
        asked = [p for p, _, _ in server.requests if "config_format" in p]
    assert (first.logprobs_kind, second.logprobs_kind) == (kind, kind)
    assert asked == ["/server_info?config_format=json"]
