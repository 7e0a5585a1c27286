"""The loopback OpenAI-compatible stand-in answers like the servers it stands for."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.support.fake_model import Fault, Reply
from tests.support.fake_openai import FakeOpenAI

CHAT: dict[str, Any] = {
    "model": "test-model",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": False,
}


def answer(server: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    r = httpx.post(f"{server.api}/chat/completions", json={**CHAT, **extra})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    data: dict[str, Any] = r.json()
    return data


@pytest.mark.parametrize(
    ("flavor", "path", "key"),
    [
        ("vllm", "/version", "version"),
        ("sglang", "/server_info", "version"),
        ("sglang", "/get_server_info", "model_path"),
        ("llamacpp", "/props", "build_info"),
        ("lmstudio", "/api/v0/models", "data"),
    ],
)
def test_each_flavour_says_who_it_is_where_it_does(flavor: str, path: str, key: str) -> None:
    with FakeOpenAI(flavor) as server:
        assert key in httpx.get(server.url + path).json()
        assert httpx.get(f"{server.api}/models").json()["data"][0]["id"] == "test-model"
        others = {"/version", "/props", "/api/v0/models", "/server_info"} - {path}
        if flavor == "sglang":
            others -= {"/server_info"}
        assert all(httpx.get(server.url + p).status_code == 404 for p in others)


@pytest.mark.parametrize(
    ("flavor", "field"), [("vllm", "reasoning"), ("llamacpp", "reasoning_content")]
)
def test_reasoning_comes_under_the_flavours_own_name(flavor: str, field: str) -> None:
    with FakeOpenAI(flavor) as server:
        server.script(Reply(content="4", thinking="2+2"))
        whole = answer(server)
    (choice,) = whole["choices"]
    assert (choice["message"][field], choice["message"]["content"]) == ("2+2", "4")
    assert choice["finish_reason"] == "stop" and whole["usage"]["completion_tokens"] > 0


def test_tool_calls_come_whole_with_json_string_arguments_and_no_content() -> None:
    call = {"function": {"name": "python", "arguments": {"code": "print(2)"}}}
    with FakeOpenAI("llamacpp") as server:
        server.script(Reply(content="", tool_calls=[call]))
        (choice,) = answer(server)["choices"]
    assert choice["message"]["content"] is None and choice["finish_reason"] == "tool_calls"
    (sent,) = choice["message"]["tool_calls"]
    assert sent["function"] == {"name": "python", "arguments": '{"code":"print(2)"}'}


def test_vllm_refuses_streaming_options_without_streaming_and_continuing_with_a_prompt() -> None:
    messages = [*CHAT["messages"], {"role": "assistant", "content": "Hel"}]
    with FakeOpenAI("vllm") as server:
        body = {**CHAT, "messages": messages, "continue_final_message": True}
        for extra in ({"add_generation_prompt": True}, {"stream_options": {"include_usage": True}}):
            r = httpx.post(f"{server.api}/chat/completions", json={**body, **extra})
            assert r.status_code == 400, extra
        answer(server, messages=messages, continue_final_message=True, add_generation_prompt=False)
        assert server.prompts[-1].endswith("<|im_start|>assistant\nHel")


def test_vllm_gives_the_prompt_ids_and_the_choices_token_ids_only_when_asked() -> None:
    with FakeOpenAI("vllm") as server:
        server.script("one two", "one two")
        whole = answer(server, return_token_ids=True)
        assert server.vocab.decode(whole["prompt_token_ids"]) == server.prompts[-1]
        assert server.vocab.decode(whole["choices"][0]["token_ids"]) == "one two"
        plain = answer(server)
    assert plain["prompt_token_ids"] is None and plain["choices"][0]["token_ids"] is None


def test_llamacpp_completion_keeps_the_stop_strings_tokens_without_their_probabilities() -> None:
    with FakeOpenAI("llamacpp") as server:
        server.script("print(1)\n<result>1</result>")
        ids = httpx.post(f"{server.url}/tokenize", json={"content": "go"}).json()["tokens"]
        body = {"prompt": ids, "n_probs": 1, "stop": ["<result>"], "return_tokens": True}
        whole = httpx.post(f"{server.url}/completion", json=body).json()
    assert whole["content"] == "print(1)\n"
    assert server.vocab.decode(whole["tokens"]).startswith("print(1)\n<result>")
    assert len(whole["completion_probabilities"]) == len(whole["tokens"]) - 2  # "<res", "ult>"
    assert (whole["stop_type"], whole["stopping_word"]) == ("word", "<result>")


def test_streaming_is_refused() -> None:
    with FakeOpenAI("llamacpp") as server:
        r = httpx.post(f"{server.api}/chat/completions", json={**CHAT, "stream": True})
        assert r.status_code == 400 and "non-streamed" in r.json()["error"]["message"]


def test_faults_take_the_answers_place() -> None:
    with FakeOpenAI("vllm") as server:
        server.set_responder(lambda path, body: "a fairly long answer")
        server.fail_next(
            Fault("error_line", message="boom"),
            Fault("status", 429, seconds=3),
            Fault("malformed"),
            Fault("drop"),
        )
        url = f"{server.api}/chat/completions"
        r = httpx.post(url, json=CHAT)
        assert r.status_code == 500 and r.json()["error"]["message"] == "boom"
        r = httpx.post(url, json=CHAT)
        assert (r.status_code, r.headers["retry-after"]) == (429, "3")
        assert r.json()["error"]["code"] == 429
        r = httpx.post(url, json=CHAT)
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(r.content)
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(url, json=CHAT)
