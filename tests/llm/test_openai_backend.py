"""OpenAIBackend against the loopback stand-in: what is sent, what comes back, per server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support import fake_openai
from tests.support.backends import QUICK_RETRIES
from tests.support.fake_model import Fault, Reply
from tests.support.fake_openai import FakeOpenAI
from tracegen.errors import (
    AuthError,
    BadRequest,
    ConfigError,
    Overloaded,
    ProtocolError,
    ServerError,
)
from tracegen.llm.base import ChatRequest, SamplingOptions, ServerInfo
from tracegen.llm.grammar import Grammar, alt
from tracegen.llm.openai import OpenAIBackend, openai_messages
from tracegen.llm.openai_servers import FLAVORS
from tracegen.llm.server_backend import Json
from tracegen.schema import ChatMessage, ToolCall, ToolFunction

CALL = {"function": {"name": "python", "arguments": {"code": "print(2)"}}}
SECRET = "sk-openai-secret-0123"


def backend(server: FakeOpenAI, host: str | None = None, **kw: Any) -> OpenAIBackend:
    return OpenAIBackend(host or server.api, "test-model", **{**QUICK_RETRIES, **kw})


def request(*messages: tuple[str, str], **kw: Any) -> ChatRequest:
    msgs = messages or (("user", "write add"),)
    return ChatRequest(messages=[ChatMessage(role=r, content=c) for r, c in msgs], **kw)  # type: ignore[arg-type]


def chat_bodies(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [b for p, b, _ in server.requests if p == "/v1/chat/completions"]


async def test_the_request_carries_sampling_and_logprobs_and_asks_for_one_whole_answer() -> None:
    options = SamplingOptions(
        temperature=0.2, top_p=0.9, top_k=20, seed=3, max_tokens=64, stop=["<result>"]
    )
    tools = [{"type": "function", "function": {"name": "python", "parameters": {}}}]
    with FakeOpenAI("vllm") as server:
        async with backend(server) as b:
            await b.chat(request(options=options, tools=tools, think=False, top_logprobs=5))
        (body,) = chat_bodies(server)
    assert body["stream"] is False and "stream_options" not in body
    assert (body["temperature"], body["top_p"], body["top_k"], body["seed"]) == (0.2, 0.9, 20, 3)
    assert (body["max_tokens"], body["stop"], body["tools"]) == (64, ["<result>"], tools)
    assert (body["logprobs"], body["top_logprobs"], body["return_token_ids"]) == (True, 5, True)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"] == [{"role": "user", "content": "write add"}]


@pytest.mark.parametrize("flavor", ["vllm", "sglang"])
async def test_tool_calls_in_fragments_and_either_reasoning_field_come_back_whole(
    flavor: str,
) -> None:
    with FakeOpenAI(flavor) as server:
        server.script(Reply(content="", thinking="Run it.", tool_calls=[CALL, CALL]))
        async with backend(server) as b:
            c = await b.chat(request())
    assert (c.thinking, c.finish_reason) == ("Run it.", "tool_calls")
    assert [(t.id, t.function.arguments) for t in c.tool_calls] == [
        ("call_0", {"code": "print(2)"}),
        ("call_1", {"code": "print(2)"}),
    ]


async def test_vllm_token_id_placeholders_give_ids_and_text() -> None:
    with FakeOpenAI("vllm", token_ids_as_text=True) as server:
        server.script("def add(a, b):")
        async with backend(server) as b:
            c = await b.chat(request(top_logprobs=2))
    assert c.logprobs is not None and "".join(t.token for t in c.logprobs) == "def add(a, b):"
    assert [t.id for t in c.logprobs] == c.completion_ids
    assert c.logprobs[0].top_logprobs[1].token.startswith("token_id:")


def test_messages_take_the_openai_shape_with_tool_call_ids() -> None:
    call = ToolCall(function=ToolFunction(name="python", arguments={"code": "1"}))
    messages = [
        ChatMessage(role="assistant", content="", tool_calls=[call]),
        ChatMessage(role="tool", content="1", tool_name="python"),
    ]
    sent = openai_messages(messages)
    assert sent[0]["tool_calls"] == [
        {
            "id": "call_0_0",
            "type": "function",
            "function": {"name": "python", "arguments": '{"code":"1"}'},
        }
    ]
    assert sent[1] == {"role": "tool", "content": "1", "tool_call_id": "call_0_0"}


async def test_continue_asks_for_the_final_message_to_be_continued() -> None:
    with FakeOpenAI("sglang") as server:
        server.script(" more")
        async with backend(server) as b:
            c = await b.continue_message(request(("user", "hi"), ("assistant", "<think>")), "auto")
        (body,) = chat_bodies(server)
    assert (c.content, c.continuation) == (" more", "continue")
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    assert body["messages"][-1] == {"role": "assistant", "content": "<think>"}


async def test_raw_on_llamacpp_refuses_a_server_that_closes_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closing = fake_openai.render_chat
    monkeypatch.setattr(fake_openai, "render_chat", lambda m, **kw: closing(m, open_last=False))
    with FakeOpenAI("llamacpp") as server:
        async with backend(server) as b:
            with pytest.raises(BadRequest, match="without --no-prefill-assistant"):
                await b.continue_message(request(("user", "hi"), ("assistant", "<think>")), "raw")
        assert "/completion" not in server.paths()


async def test_llamacpp_goes_on_from_sampled_ids_only_when_they_read_as_the_prompt() -> None:
    """Two hosts of one model: ids sampled on one are joined onto a prompt for the other only
    if they decode there to the same text. Here the hosts number the same pieces
    differently, so the other host's prompt is tokenized afresh instead."""
    opened = (("user", "hi"), ("assistant", "<think>Let"))
    going_on = (("user", "hi"), ("assistant", "<think>Let us add them. Done"))
    next_turn = (*going_on[:1], ("assistant", f"{going_on[1][1]}ok"), ("user", "and now?"))
    stop = SamplingOptions(stop=["."])  # the stop string's token is sampled, and kept
    with FakeOpenAI("llamacpp") as a, FakeOpenAI("llamacpp") as b:
        b.vocab.encode("numbered first here")
        a.script(Reply(content=" us add them.", by_character=True), "ok")
        b.script("fine")
        async with backend(a) as on_a, backend(b) as on_b:
            first = await on_a.continue_message(request(*opened, options=stop), "raw")
            then = await on_a.continue_message(request(*going_on), "raw")
            elsewhere = await on_b.chat(request(*next_turn))
    assert first.prompt_ids is not None and first.completion_ids is not None
    assert then.prompt_ids is not None and then.completion_ids is not None
    sent = first.prompt_ids + first.completion_ids
    assert then.prompt_ids[: len(sent)] == sent
    remembered = a.vocab.decode(then.prompt_ids + then.completion_ids)
    assert b.prompts[0].startswith(remembered)  # so the ids sampled on a were on offer
    assert elsewhere.prompt_ids == b.vocab.encode(b.prompts[0])


@pytest.mark.parametrize("with_v1", [True, False])
async def test_a_host_is_taken_with_or_without_v1(with_v1: bool) -> None:
    with FakeOpenAI("llamacpp") as server:
        server.script("ok")
        async with backend(server, server.api if with_v1 else server.url) as b:
            assert (await b.server_info()).kind == "llamacpp"
            assert (await b.chat(request())).content == "ok"
            assert await b.model_names() == ["test-model"]


async def test_an_unknown_server_answering_v1_models_is_a_generic_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = fake_openai._Handler.do_GET

    def without_version(handler: fake_openai._Handler) -> None:
        handler.path = handler.path.replace("/version", "/nothing")
        answer(handler)

    monkeypatch.setattr(fake_openai._Handler, "do_GET", without_version)
    with FakeOpenAI("vllm") as server:
        async with backend(server) as b:
            info = await b.server_info()
            with pytest.raises(ConfigError, match="choices that do: none"):
                await b.continue_message(request(("user", "hi"), ("assistant", "x")), "auto")
    assert (info.kind, info.name) == ("openai", "an OpenAI-compatible server")


async def test_a_failed_generation_is_retried_then_reported_with_its_message() -> None:
    with FakeOpenAI("vllm") as server:
        server.set_responder(lambda path, body: "a long enough answer to break")
        server.fail_next(*[Fault("error_line", message="CUDA out of memory")] * 3)
        async with backend(server) as b:
            with pytest.raises(ServerError, match=r"\(HTTP 500\) failed: CUDA out of memory"):
                await b.chat(request())
    assert len(chat_bodies(server)) == 3


async def test_the_key_is_a_bearer_token_never_shown() -> None:
    with FakeOpenAI("vllm", api_key=SECRET) as server:
        async with backend(server, api_key=SECRET) as b:
            await b.chat(request())
            assert SECRET not in repr(b)
        async with backend(server, api_key="sk-wrong") as b:
            with pytest.raises(AuthError) as info:
                await b.chat(request())
    assert "OPENAI_API_KEY was rejected" in str(info.value) and "sk-wrong" not in str(info.value)
    assert all(h["authorization"] == f"Bearer {SECRET}" for _, _, h in server.requests[:-1])


def answering(*bodies: Any) -> OpenAIBackend:
    """A vLLM backend whose server answers each generation request with the next body, 200."""
    answers = iter(bodies)

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=next(answers))

    vllm = ServerInfo(kind="vllm", name="vLLM", version="0.11.2")
    return OpenAIBackend(
        "http://vllm/v1",
        "test-model",
        server=vllm,
        transport=httpx.MockTransport(handle),
        **QUICK_RETRIES,
    )


WHOLE = {"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]}
BAD_ENTRY = {"token": "ok", "logprob": "very likely"}


@pytest.mark.parametrize(
    ("broken", "error", "message"),
    [
        ({"error": {"message": "engine dead", "code": 500}}, ServerError, "error: engine dead"),
        ({"error": {"message": "queue full", "code": 429}}, Overloaded, "error: queue full"),
        ({"object": "chat.completion", "choices": []}, ProtocolError, "without choices"),
        (
            {"choices": [{"message": {"content": "ok"}, "logprobs": {"content": [BAD_ENTRY]}}]},
            ProtocolError,
            "malformed logprobs entry",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"arguments": "[1]"}}]}}]},
            ProtocolError,
            "not a JSON object",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"arguments": '{"c'}}]}}]},
            ProtocolError,
            "not a JSON object",
        ),
    ],
    ids=["error", "overloaded", "no-choices", "bad-logprobs", "list-arguments", "cut-arguments"],
)
async def test_a_broken_answer_with_status_200_is_retried_then_reported(
    broken: Json, error: type[Exception], message: str
) -> None:
    async with answering(broken, WHOLE) as b:
        assert (await b.chat(request())).content == "ok"
    async with answering(*[broken] * 3) as b:
        with pytest.raises(error, match=message):
            await b.chat(request())


@pytest.mark.parametrize("top", [0, 2])
async def test_llamacpp_chat_keeps_only_the_alternatives_asked_for(top: int) -> None:
    with FakeOpenAI("llamacpp") as server:
        server.script("def add(a, b):")
        async with backend(server) as b:
            c = await b.chat(request(think=True, top_logprobs=top))
        (body,) = chat_bodies(server)
    assert c.logprobs and all(len(t.top_logprobs) == top for t in c.logprobs)
    assert [t.id for t in c.logprobs] == [server.vocab.id(t.token) for t in c.logprobs]
    assert c.generation_s > 0 and body["top_logprobs"] == max(1, top)


@pytest.mark.parametrize(
    ("version", "field"),
    [
        ("0.11.2", "structured_outputs"),
        ("0.10.2", "structured_outputs"),
        ("0.9.2", "guided_grammar"),
    ],
)
async def test_vllm_takes_a_grammar_in_the_field_its_version_reads(
    version: str, field: str
) -> None:
    grammar = Grammar("yes-no", {"root": alt("yes", "no")})
    with FakeOpenAI("vllm", version=version) as server:
        server.script("yes")
        async with backend(server) as b:
            await b.chat(request(options=SamplingOptions(grammar=grammar)))
        (body,) = chat_bodies(server)
    assert field in body and fake_openai.grammar_sent(body) == grammar.gbnf


def test_a_server_that_takes_a_grammar_says_so_and_one_that_does_not_says_nothing() -> None:
    for flavor in FLAVORS.values():
        assert flavor.capabilities.grammar == (flavor.grammar is not None), flavor.name
    assert {f.kind for f in FLAVORS.values() if f.capabilities.grammar} == {
        "llamacpp",
        "sglang",
        "vllm",
    }
