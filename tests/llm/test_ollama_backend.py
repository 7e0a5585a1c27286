"""OllamaBackend against the loopback server: what is sent, what comes back, every fault."""

from __future__ import annotations

import logging
import socket
from typing import Any

import httpx
import pydantic
import pytest

from tests.support.backends import QUICK_RETRIES
from tests.support.fake_ollama import FakeOllama, Fault, Reply, _Handler
from tracegen.errors import (
    AuthError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    ModelNotFound,
    Overloaded,
    ProtocolError,
    RepeatedAnswer,
    ServerError,
)
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.ollama import OllamaBackend
from tracegen.schema import ChatMessage, TokenLogprob, TopLogprob

ANSWER = "def add(a, b):\n    return a + b\n"
CALL = {"function": {"name": "python", "arguments": {"code": "print(2)"}}}


def backend(server: FakeOllama, **kw: Any) -> OllamaBackend:
    kw = {"max_attempts": 3, "retry_initial_s": 0.001, "retry_max_s": 0.01, **kw}
    return OllamaBackend(server.url, "test-model", **kw)


def request(*messages: tuple[str, str], **kw: Any) -> ChatRequest:
    msgs = messages or (("user", "write add"),)
    return ChatRequest(messages=[ChatMessage(role=r, content=c) for r, c in msgs], **kw)  # type: ignore[arg-type]


def sent(server: FakeOllama, index: int = -1) -> dict[str, Any]:
    return server.requests[index][1]


# ---------------------------------------------------------------- what comes back


async def test_chat_accumulates_every_chunk_into_one_completion(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(Reply(content=ANSWER, thinking="Add them.", tool_calls=[CALL]))
    async with backend(fake_ollama) as b:
        c = await b.chat(request(think=True))
    assert (c.content, c.thinking, c.finish_reason) == (ANSWER, "Add them.", "tool_calls")
    assert [t.function.name for t in c.tool_calls] == ["python"]
    assert c.tool_calls[0].function.arguments == {"code": "print(2)"}
    assert c.completion_tokens > 0 and c.prompt_tokens > 0 and c.generation_s > 0
    assert (c.host, c.model, c.continuation) == (fake_ollama.url, "test-model", None)


async def test_logprobs_split_over_chunks_are_concatenated_in_order(
    fake_ollama: FakeOllama,
) -> None:
    fake_ollama.script(Reply(content=ANSWER, thinking="Add."))
    async with backend(fake_ollama) as b:
        c = await b.chat(request(top_logprobs=3))
    assert c.logprobs is not None and len(c.logprobs) > 5
    assert "".join(t.token for t in c.logprobs) == "Add." + ANSWER
    assert all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in c.logprobs)


async def test_logprobs_are_none_when_the_server_returns_none(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(Reply(content=ANSWER, logprobs=False), ANSWER)
    async with backend(fake_ollama) as b:
        assert (await b.chat(request())).logprobs is None
        assert (await b.chat(request(logprobs=False))).logprobs is None
    assert "logprobs" not in sent(fake_ollama)


async def test_tool_calls_are_collected(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(Reply(tool_calls=[CALL]))
    async with backend(fake_ollama) as b:
        c = await b.chat(request())
    assert [t.function.arguments for t in c.tool_calls] == [{"code": "print(2)"}]


async def test_num_predict_cut_reports_length(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(ANSWER)
    async with backend(fake_ollama) as b:
        c = await b.chat(request(options=SamplingOptions(max_tokens=2)))
    assert c.finish_reason == "length" and len(c.content) < len(ANSWER)


# ---------------------------------------------------------------- what is sent


async def test_request_carries_options_with_stop_as_an_array(fake_ollama: FakeOllama) -> None:
    options = SamplingOptions(
        temperature=0.2, seed=3, context_tokens=8192, max_tokens=64, stop=["<result>"]
    )
    tools = [{"type": "function", "function": {"name": "python", "parameters": {}}}]
    async with backend(fake_ollama, keep_alive="10m") as b:
        await b.chat(request(options=options, tools=tools, think=False, top_logprobs=5))
    body = sent(fake_ollama)
    assert body["options"] == {
        "temperature": 0.2,
        "seed": 3,
        "num_ctx": 8192,
        "num_predict": 64,
        "stop": ["<result>"],
    }
    assert (body["logprobs"], body["top_logprobs"], body["think"]) == (True, 5, False)
    assert (body["tools"], body["keep_alive"], body["stream"]) == (tools, "10m", False)
    assert body["messages"] == [{"role": "user", "content": "write add"}]


async def test_top_logprobs_is_sent_only_with_logprobs(fake_ollama: FakeOllama) -> None:
    async with backend(fake_ollama) as b:
        await b.chat(request(logprobs=False, top_logprobs=4))
        assert "top_logprobs" not in sent(fake_ollama) and "logprobs" not in sent(fake_ollama)
        await b.chat(request(top_logprobs=20))
        assert sent(fake_ollama)["top_logprobs"] == 20


def test_top_logprobs_outside_0_to_20_is_refused_before_sending() -> None:
    for bad in (-1, 21):
        with pytest.raises(pydantic.ValidationError):
            request(top_logprobs=bad)


async def test_assistant_messages_keep_their_tool_calls(fake_ollama: FakeOllama) -> None:
    history = [
        ChatMessage(role="user", content="go"),
        ChatMessage.model_validate({"role": "assistant", "tool_calls": [CALL]}),
        ChatMessage(role="tool", content="2", tool_name="python"),
    ]
    async with backend(fake_ollama) as b:
        await b.chat(ChatRequest(messages=history))
    assert sent(fake_ollama)["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "2", "tool_name": "python"},
    ]


# ---------------------------------------------------------------- continuation


async def test_prefill_continues_the_assistant_message_on_chat(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(" more text")
    async with backend(fake_ollama) as b:
        c = await b.continue_message(request(("user", "hi"), ("assistant", "<think>")), "prefill")
    assert (c.content, c.continuation) == (" more text", "prefill")
    assert fake_ollama.paths() == ["/api/chat"]
    assert sent(fake_ollama)["messages"][-1] == {"role": "assistant", "content": "<think>"}


async def test_raw_renders_the_prompt_then_generates_raw(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(" more text")
    req = request(
        ("user", "hi"), ("assistant", "<think>"), options=SamplingOptions(context_tokens=4096)
    )
    async with backend(fake_ollama) as b:
        c = await b.continue_message(req, "raw")
    assert (c.content, c.continuation) == (" more text", "raw")
    assert fake_ollama.paths() == ["/api/chat", "/api/generate"]
    assert sent(fake_ollama, 0)["_debug_render_only"] is True
    body = sent(fake_ollama, 1)
    assert (body["raw"], body["think"], body["options"]) == (True, False, {"num_ctx": 4096})
    assert body["prompt"].endswith("<|im_start|>assistant\n<think>")


async def test_raw_continuation_on_a_server_that_cannot_render_is_refused_not_retried(
    fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = _Handler._infer

    def older_ollama(handler: _Handler, body: dict[str, Any]) -> None:
        body.pop("_debug_render_only", None)
        answer(handler, body)

    monkeypatch.setattr(_Handler, "_infer", older_ollama)
    req = request(("user", "hi"), ("assistant", "<think>"))
    async with backend(fake_ollama) as b:
        with pytest.raises(BadRequest, match=r"raw continuation needs Ollama 0\.11\.5 or newer"):
            await b.continue_message(req, "raw")
    assert fake_ollama.paths() == ["/api/chat"]


async def test_continuing_needs_an_assistant_message_last(fake_ollama: FakeOllama) -> None:
    async with backend(fake_ollama) as b:
        with pytest.raises(ValueError, match="assistant"):
            await b.continue_message(request(), "prefill")


# ---------------------------------------------------------------- faults and retries


@pytest.mark.parametrize("status", [503, 429])
async def test_overload_is_retried_then_succeeds(fake_ollama: FakeOllama, status: int) -> None:
    fake_ollama.script(ANSWER)
    fake_ollama.fail_next(Fault("status", status=status))
    async with backend(fake_ollama) as b:
        assert (await b.chat(request())).content == ANSWER
    assert fake_ollama.paths() == ["/api/chat", "/api/chat"]


async def test_persistent_overload_gives_up_after_max_attempts(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(*[Fault("status", status=429, message="usage limit")] * 5)
    async with backend(fake_ollama, max_attempts=4) as b:
        with pytest.raises(Overloaded, match=r"HTTP 429\) is busy: usage limit"):
            await b.chat(request())
    assert len(fake_ollama.requests) == 4


async def test_server_errors_are_retried_a_bounded_number_of_times(
    fake_ollama: FakeOllama,
) -> None:
    fake_ollama.fail_next(*[Fault("status", status=500, message="runner crashed")] * 5)
    async with backend(fake_ollama, max_attempts=3) as b:
        with pytest.raises(ServerError, match="runner crashed"):
            await b.chat(request())
    assert len(fake_ollama.requests) == 3


async def test_retries_stop_when_the_time_budget_is_spent(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(*[Fault("status", status=503)] * 1000)
    async with backend(fake_ollama, max_attempts=1000, max_retry_s=0.3, retry_max_s=0.05) as b:
        with pytest.raises(Overloaded):
            await b.chat(request())
    assert 1 < len(fake_ollama.requests) < 1000


async def test_a_server_failure_carries_the_server_message(fake_ollama: FakeOllama) -> None:
    fake_ollama.set_responder(lambda path, body: ANSWER)
    fake_ollama.fail_next(Fault("error_line", message="out of memory"))
    async with backend(fake_ollama) as b:
        assert (await b.chat(request())).content == ANSWER
        fake_ollama.fail_next(*[Fault("error_line", message="out of memory")] * 3)
        with pytest.raises(ServerError, match=r"\(HTTP 500\) failed: out of memory"):
            await b.chat(request())
    assert len(fake_ollama.requests) == 5


@pytest.mark.parametrize("kind", ["error_line", "status"])
async def test_a_servers_long_message_is_clipped_where_it_is_read(
    fake_ollama: FakeOllama, kind: str
) -> None:
    fake_ollama.fail_next(*[Fault(kind, status=500, message="oom " * 100_000)] * 3)
    async with backend(fake_ollama, max_attempts=3, retry_max_s=0.01) as b:
        with pytest.raises(ServerError) as info:
            await b.chat(request())
    assert "oom oom" in str(info.value) and len(str(info.value)) < 500


async def test_malformed_line_is_a_clear_protocol_error(fake_ollama: FakeOllama) -> None:
    fake_ollama.set_responder(lambda path, body: ANSWER)
    fake_ollama.fail_next(*[Fault("malformed")] * 3)
    async with backend(fake_ollama) as b:
        with pytest.raises(ProtocolError, match="malformed response") as info:
            await b.chat(request())
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert len(fake_ollama.requests) == 2  # the same malformed answer twice: not asked again


def answering(logprobs: Any) -> OllamaBackend:
    """A backend whose every chat request is answered ``ok`` with these ``logprobs``."""
    body = {"message": {"content": "ok"}, "done": True, "done_reason": "stop", "logprobs": logprobs}
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=body))
    return OllamaBackend("http://ollama", "test-model", transport=transport, **QUICK_RETRIES)


@pytest.mark.parametrize(
    ("logprobs", "reason"),
    [
        (
            [{"token": "o", "logprob": -1}, {"token": "k", "logprob": "likely"}],
            "[1].logprob: expected `float`, got `str`",
        ),
        (
            [{"token": "ok", "logprob": -1, "bytes": [111, 1000]}],
            "[0].bytes[1]: expected `int` <= 255",
        ),
        (
            [{"token": "ok", "logprob": -1, "top_logprobs": [{"logprob": -2}]}],
            "[0].top_logprobs[0]: object missing required field `token`",
        ),
        ({"token": "ok"}, "expected `array`, got `object`"),
    ],
    ids=["logprob", "byte", "alternative", "not-a-list"],
)
async def test_a_malformed_logprobs_entry_is_one_protocol_error_saying_where(
    logprobs: Any, reason: str
) -> None:
    async with answering(logprobs) as b:
        with pytest.raises(RepeatedAnswer) as info:  # the same answer twice: not asked again
            await b.chat(request())
    assert str(info.value) == (
        "http://ollama sent the same answer tracegen cannot read twice in a row: "
        f"sent a malformed logprobs entry: {reason}"
    )


async def test_logprob_fields_a_server_adds_are_ignored() -> None:
    entry = {
        "token": "ok",
        "logprob": 0,
        "rank": 1,
        "top_logprobs": [{"token": "k", "logprob": -3, "id": 7}],
    }
    async with answering([entry]) as b:
        c = await b.chat(request())
    assert c.logprobs == [
        TokenLogprob(token="ok", logprob=0.0, top_logprobs=[TopLogprob(token="k", logprob=-3.0)])
    ]


async def test_dropped_connection_is_retried_and_the_partial_stream_discarded(
    fake_ollama: FakeOllama,
) -> None:
    fake_ollama.set_responder(lambda path, body: ANSWER)
    fake_ollama.fail_next(Fault("drop"), Fault("malformed"))
    async with backend(fake_ollama) as b:
        c = await b.chat(request())
    assert c.content == ANSWER
    assert c.logprobs is not None and "".join(t.token for t in c.logprobs) == ANSWER
    assert len(fake_ollama.requests) == 3


async def test_read_timeout_is_retried_then_reported(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(*[Fault("stall", seconds=0.5)] * 3)
    async with backend(fake_ollama, timeout_s=0.1, max_attempts=2) as b:
        with pytest.raises(BackendTimeout, match=r"did not answer within 0\.1s"):
            await b.chat(request())
    assert len(fake_ollama.requests) == 2


async def test_a_stall_shorter_than_the_timeout_is_just_slow(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(Fault("stall", seconds=0.05))
    async with backend(fake_ollama, timeout_s=5) as b:
        assert (await b.chat(request())).content


async def test_connection_refused_says_to_start_ollama() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with OllamaBackend(url, "m", max_attempts=2, retry_initial_s=0.001) as b:
        with pytest.raises(BackendUnavailable) as info:
            await b.chat(request())
    assert str(info.value) == f"cannot reach Ollama at {url}: is `ollama serve` running?"


async def test_unknown_model_says_to_pull_it_and_is_not_retried(fake_ollama: FakeOllama) -> None:
    async with OllamaBackend(fake_ollama.url, "qwen3:8b", retry_initial_s=0.001) as b:
        with pytest.raises(ModelNotFound) as info:
            await b.chat(request())
    assert (
        str(info.value)
        == f"model qwen3:8b not found at {fake_ollama.url}: run `ollama pull qwen3:8b`"
    )
    assert len(fake_ollama.requests) == 1


async def test_bad_request_carries_the_server_message(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(Fault("status", status=400, message="invalid format"))
    async with backend(fake_ollama) as b:
        with pytest.raises(BadRequest, match="rejected the request: invalid format"):
            await b.chat(request())
    assert len(fake_ollama.requests) == 1


# ---------------------------------------------------------------- Ollama Cloud key


SECRET = "sk-very-secret-0123456789"


async def test_api_key_is_sent_as_a_bearer_header(fake_ollama: FakeOllama) -> None:
    async with backend(fake_ollama, api_key=SECRET) as b:
        await b.chat(request())
        await b.server_info()
    assert all(h["authorization"] == f"Bearer {SECRET}" for _, _, h in fake_ollama.requests)


async def test_no_key_no_authorization_header(fake_ollama: FakeOllama) -> None:
    async with backend(fake_ollama) as b:
        await b.chat(request())
    assert "authorization" not in fake_ollama.requests[0][2]


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failure_names_the_variable_and_never_the_key(
    fake_ollama: FakeOllama, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_ollama.fail_next(Fault("status", status=503), Fault("status", status=status))
    async with backend(fake_ollama, api_key=SECRET) as b:
        with pytest.raises(AuthError) as info:
            await b.chat(request())
        assert SECRET not in repr(b) and SECRET not in str(b)
    message = str(info.value)
    assert "OLLAMA_API_KEY was rejected" in message and SECRET not in message
    assert all(SECRET not in r.getMessage() for r in caplog.records)


async def test_auth_failure_without_a_key_says_it_is_missing(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(Fault("status", status=401))
    async with backend(fake_ollama) as b:
        with pytest.raises(AuthError, match="OLLAMA_API_KEY is missing"):
            await b.chat(request())


# ---------------------------------------------------------------- metadata


async def test_server_info_model_names_and_features(fake_ollama: FakeOllama) -> None:
    async with backend(fake_ollama) as b:
        info = await b.server_info()
        assert (info.kind, info.name) == ("ollama", "Ollama") and info.version
        assert await b.model_names() == ["test-model"]
        assert "tools" in await b.model_features()
    async with OllamaBackend(fake_ollama.url, "other", max_attempts=1) as b:
        with pytest.raises(ModelNotFound, match="ollama pull other"):
            await b.model_features()
