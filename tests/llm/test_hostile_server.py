"""Both server backends against stand-ins misbehaving at the HTTP level on demand
(`tests.support.hostile_wire`): what the RFC forbids, an answer in a format not asked for and
impossible token ids are refused and retried, never taken as data; an answer without end stops
at its limit and a dripped one at the request's deadline; gzip is decoded; a late answer never
answers the next request; a server that only answers what cannot be read is asked no more."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest

from tests.support.backends import QUICK_RETRIES
from tests.support.fake_model import FakeModel, Fault
from tests.support.fake_ollama import FakeOllama
from tests.support.fake_openai import FakeOpenAI
from tests.support.local_engine import ScriptedEngine, scripted_local
from tracegen.errors import (
    BackendTimeout,
    ConfigError,
    ImpossibleTokenId,
    ProtocolError,
    RepeatedAnswer,
    UnreadableServer,
)
from tracegen.llm.base import ChatRequest, SamplingOptions, ServerInfo
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.openai import OpenAIBackend, read_chat, read_native
from tracegen.llm.server_backend import ANSWER_FLOOR_BYTES, HttpBackend, answer_limit
from tracegen.schema import ChatMessage

KINDS = ["ollama", "vllm", "llamacpp"]
REFUSED = [
    "bad-chunk",
    "conflicting-lengths",
    "status-2001",
    "http-1.9",
    "bogus-transfer-encoding",
    "bare-lf",
    "event-stream",
]


@contextmanager
def serving(kind: str, **options: Any) -> Iterator[tuple[FakeModel, HttpBackend, list[str]]]:
    """The stand-in of ``kind``, and a backend for it that tells its retries in a list."""
    retries: list[str] = []
    opts: dict[str, Any] = {**QUICK_RETRIES, "on_retry": retries.append, **options}
    server: FakeModel
    if kind == "ollama":
        server = FakeOllama().start()
        backend: HttpBackend = OllamaBackend(server.url, "test-model", **opts)
    else:
        server = FakeOpenAI(kind).start()
        info = ServerInfo(kind=kind, name=kind, version="")
        backend = OpenAIBackend(server.url, "test-model", server=info, **opts)
    server.set_responder(lambda path, body: "the answer")
    try:
        yield server, backend, retries
    finally:
        server.stop()


def ask(n: int = 0) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=f"question {n}")])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", REFUSED)
async def test_what_cannot_be_read_is_refused_showing_its_first_bytes_then_retried(
    kind: str, name: str
) -> None:
    with serving(kind) as (server, backend, retries):
        server.fail_next(Fault("wire", message=name))
        started = time.monotonic()
        completion = await backend.chat(ask())
        await backend.aclose()
    assert completion.content == "the answer"
    assert time.monotonic() - started < 2.0
    (retry,) = retries
    assert "it began: b'" in retry, retry


@pytest.mark.parametrize("kind", ["vllm", "llamacpp"])
async def test_impossible_token_ids_are_an_error_never_data(kind: str) -> None:
    with serving(kind) as (server, backend, retries):
        server.fail_next(Fault("wire", message="impossible-ids"))
        completion = await backend.chat(ask())
        server.fail_randomly(1.0, [Fault("wire", message="impossible-ids")], seed=1)
        with pytest.raises(RepeatedAnswer, match="id -5, outside"):
            await backend.chat(ask())  # the same impossible ids twice: not asked a third time
        await backend.aclose()
    assert completion.completion_ids and min(completion.completion_ids) >= 0
    assert "id -5, outside" in retries[0]
    if kind == "llamacpp":  # the vocabulary the server reports bounds the ids
        assert isinstance(backend, OpenAIBackend) and backend.vocab == 151_936


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["endless-chunked", "huge-body"])
async def test_an_answer_without_end_stops_at_the_limit(kind: str, name: str) -> None:
    with serving(kind, max_answer_bytes=1 << 20) as (server, backend, retries):
        server.fail_next(Fault("wire", message=name))
        started = time.monotonic()
        assert (await backend.chat(ask())).content == "the answer"
        await backend.aclose()
    assert time.monotonic() - started < 2.0
    assert "larger than 1,048,576 bytes" in retries[0]


async def test_the_answer_limit_comes_from_max_tokens() -> None:
    with serving("vllm") as (server, backend, _):
        server.fail_randomly(1.0, [Fault("wire", message="endless-chunked")], seed=1)
        with pytest.raises(RepeatedAnswer, match="TRACEGEN_MAX_ANSWER_BYTES"):
            await backend.chat(ask())  # the same too large answer twice
        await backend.aclose()
    assert backend.limit_for(ask()) < 32 << 20


@pytest.mark.parametrize("kind", KINDS)
async def test_a_dripped_answer_times_out_at_the_deadline(kind: str) -> None:
    with serving(kind, timeout_s=1.0, max_attempts=1) as (server, backend, _):
        server.fail_next(Fault("wire", message="slow-drip", seconds=0.2))
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            await backend.chat(ask())
        await backend.aclose()
    assert 0.9 < time.monotonic() - started < 1.5


@pytest.mark.parametrize("kind", KINDS)
async def test_a_gzip_answer_is_decoded(kind: str) -> None:
    with serving(kind) as (server, backend, retries):
        server.fail_next(Fault("wire", message="gzip"))
        assert (await backend.chat(ask())).content == "the answer"
        await backend.aclose()
    assert retries == []
    assert all(h.get("accept-encoding") == "identity" for _, _, h in server.requests)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_late_answer_never_answers_the_next_request(kind: str) -> None:
    """Each answer is sent again 30 ms later on the same connection."""
    with serving(kind) as (server, backend, _):
        server.set_responder(lambda path, body: f"answer {orjson_text(body)}")
        server.fail_randomly(1.0, [Fault("wire", message="late-answer")], seed=1)
        answers = []
        for n, pause in enumerate((0.0, 0.0, 0.04, 0.0, 0.1, 0.01, 0.0)):
            answers.append((await backend.chat(ask(n))).content)
            time.sleep(pause)
        await backend.aclose()
    assert answers == [f"answer question {n}" for n in range(7)]


def orjson_text(body: dict[str, Any]) -> str:
    """The user's question in a chat request (either wire format) or a raw prompt."""
    if "messages" in body:
        return str(body["messages"][-1]["content"])
    prompt = str(body.get("prompt", ""))
    return prompt.split("question ", 1)[1].split("<", 1)[0].join(("question ", ""))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_answering_only_what_cannot_be_read_is_asked_no_more(kind: str) -> None:
    """The same unreadable answer to a request's second try as to its first ends the request;
    two requests in a row ended that way end the server."""
    with serving(kind) as (server, backend, retries):
        server.fail_randomly(1.0, [Fault("wire", message="event-stream")], seed=1)
        with pytest.raises(RepeatedAnswer, match=r"twice in a row: .* it began: b'data: "):
            await backend.chat(ask())  # 2 attempts
        with pytest.raises(UnreadableServer, match=r"2 requests in a row .* it began: b'data: "):
            await backend.chat(ask())  # 2 more
        with pytest.raises(UnreadableServer):
            await backend.chat(ask())  # none
        await backend.aclose()
    assert sum(server.faults_injected.values()) == 4
    assert len(retries) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_different_unreadable_answers_are_each_retried(kind: str) -> None:
    """Answers unreadable for different reasons may be a server restarting: retried."""
    names = ["event-stream", "bad-chunk", "status-2001", "http-1.9"]
    with serving(kind, max_attempts=5) as (server, backend, retries):
        server.fail_next(*(Fault("wire", message=name) for name in names))
        assert (await backend.chat(ask())).content == "the answer"
        await backend.aclose()
    assert len(retries) == 4


@pytest.mark.parametrize("kind", KINDS)
async def test_endless_interim_answers_are_refused(kind: str) -> None:
    with serving(kind, max_attempts=1) as (server, backend, _):
        server.fail_next(Fault("wire", message="continue-loop", seconds=0.01))
        started = time.monotonic()
        with pytest.raises(ProtocolError, match=r"more than 8 interim \(1xx\) answers"):
            await backend.chat(ask())
        await backend.aclose()
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("kind", KINDS)
async def test_the_limit_from_max_tokens_holds_a_full_answer_without_its_floor(kind: str) -> None:
    """A reply of ``max_tokens`` tokens with 20 alternatives each fits in the per-token part
    of `answer_limit` alone: the limit is generous before its floor is counted."""
    tokens = 400
    request = ChatRequest(
        messages=[ChatMessage(role="user", content="q")],
        options=SamplingOptions(max_tokens=tokens),
        top_logprobs=20,
    )
    with serving(kind) as (server, backend, _):
        server.set_responder(lambda path, body: " é\\n" * (tokens * 2))
        sizes: list[int] = []
        original = backend._transport.request

        async def measured(*args: Any) -> Any:
            answer = await original(*args)
            sizes.append(len(answer.body))
            return answer

        backend._transport.request = measured  # type: ignore[method-assign]
        completion = await backend.chat(request)
        await backend.aclose()
    assert completion.completion_tokens >= tokens - 1
    assert max(sizes) < answer_limit(request) - ANSWER_FLOOR_BYTES, sizes


def test_max_answer_bytes_is_a_setting_every_backend_takes() -> None:
    from tracegen.config import RunSettings, load_settings
    from tracegen.llm.factory import backend_for

    env = {"TRACEGEN_MAX_ANSWER_BYTES": "5000000"}
    settings = load_settings(RunSettings, {"model": "m"}, env=env)
    for kind in ("ollama", "openai"):
        backend = backend_for(settings, "http://gpu1:8000", kind=kind)
        assert isinstance(backend, HttpBackend) and backend.limit_for(ask()) == 5_000_000
    with pytest.raises(ConfigError, match=r"max-answer-bytes .* 1024"):
        load_settings(RunSettings, {"model": "m"}, env={"TRACEGEN_MAX_ANSWER_BYTES": "10"})


def test_logprobs_of_other_tokens_than_those_sampled_are_an_error_never_data() -> None:
    """A logprob entry's id (llama.cpp's ``id``, vLLM's ``token_id:N``) must be the id the
    server says it sampled at that place (vLLM's ``token_ids``, llama.cpp's ``tokens``): else
    the trace would pair a token with another token's logprob."""
    request = ChatRequest(messages=[ChatMessage(role="user", content="q")])
    chat = {
        "prompt_token_ids": [1, 2],
        "choices": [
            {
                "message": {"role": "assistant", "content": "ab"},
                "finish_reason": "stop",
                "token_ids": [7, 8],
                "logprobs": {
                    "content": [
                        {"token": "a", "logprob": -0.1, "id": 7},
                        {"token": "token_id:9", "logprob": -0.2, "bytes": [98]},
                    ]
                },
            }
        ],
    }
    with pytest.raises(ProtocolError, match="logprob of token 9 where it sampled 8"):
        read_chat(chat, request, "h", "m")
    native = {
        "content": "ab",
        "tokens": [7, 8, 10],  # the stop string's token has no probabilities
        "completion_probabilities": [
            {"id": 7, "token": "a", "logprob": -0.1},
            {"id": 3, "token": "b", "logprob": -0.2},
        ],
    }
    with pytest.raises(ProtocolError, match="logprob of token 3 where it sampled 8"):
        read_native(native, request, [1, 2], "h", "m")
    native["completion_probabilities"][1]["id"] = 8  # type: ignore[index]
    completion = read_native(native, request, [1, 2], "h", "m")
    assert [t.id for t in completion.logprobs or []] == [7, 8]


async def test_the_embedded_backend_refuses_impossible_token_ids_too() -> None:
    fake = FakeOpenAI("llamacpp").start()
    fake.set_responder(lambda path, body: "the answer")
    backend = scripted_local(fake)
    engine = cast(ScriptedEngine, backend.engine)
    streams = engine.handle_completions

    def impossible(body: dict[str, Any], on_chunk: Any = None) -> Any:
        def chunk(streamed: dict[str, Any]) -> bool:
            for entry in streamed["choices"][0]["logprobs"]["content"]:
                entry["id"] = -5
            return bool(on_chunk(streamed))

        return streams(body, chunk)

    try:
        assert (await backend.chat(ask())).completion_ids
        engine.handle_completions = impossible  # type: ignore[method-assign]
        with pytest.raises(ImpossibleTokenId, match="local sent token id -5"):
            await backend.chat(ask())
    finally:
        await backend.aclose()
        fake.stop()
