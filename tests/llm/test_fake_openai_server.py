"""The loopback OpenAI-compatible stand-in answers like the servers it stands for."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.support.fake_model import Fault, Reply
from tests.support.fake_openai import FakeOpenAI

CHAT = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def events(server: FakeOpenAI, **extra: Any) -> list[Any]:
    with httpx.stream("POST", f"{server.api}/chat/completions", json={**CHAT, **extra}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [orjson.loads(line.removeprefix("data: ")) for line in lines[:-1]]


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
        chunks = events(server, stream_options={"include_usage": True})
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get(field, "") for d in deltas) == "2+2"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_vllm_refuses_continuing_with_a_generation_prompt() -> None:
    messages = [*CHAT["messages"], {"role": "assistant", "content": "Hel"}]
    with FakeOpenAI("vllm") as server:
        body = {**CHAT, "messages": messages, "continue_final_message": True}
        r = httpx.post(
            f"{server.api}/chat/completions", json={**body, "add_generation_prompt": True}
        )
        assert r.status_code == 400 and "Cannot set both" in r.json()["error"]["message"]
        events(server, messages=messages, continue_final_message=True, add_generation_prompt=False)
        assert server.prompts[-1].endswith("<|im_start|>assistant\nHel")


def test_vllm_gives_prompt_ids_first_then_each_tokens_ids() -> None:
    with FakeOpenAI("vllm") as server:
        server.script("one two")
        chunks = events(server, return_token_ids=True)
        assert server.vocab.decode(chunks[0]["prompt_token_ids"]) == server.prompts[-1]
        ids = [i for c in chunks for ch in c["choices"] for i in ch.get("token_ids", [])]
        assert server.vocab.decode(ids) == "one two"


def test_llamacpp_completion_keeps_the_stop_strings_token_without_its_probabilities() -> None:
    with FakeOpenAI("llamacpp") as server:
        server.script("print(1)\n<result>1</result>")
        ids = httpx.post(f"{server.url}/tokenize", json={"content": "go"}).json()["tokens"]
        body = {"prompt": ids, "stream": True, "n_probs": 1, "stop": ["<result>"]}
        with httpx.stream("POST", f"{server.url}/completion", json=body) as r:
            chunks = [orjson.loads(x.removeprefix("data: ")) for x in r.iter_lines() if x]
    *tokens, final = chunks
    assert "".join(c["content"] for c in tokens) == "print(1)\n"
    assert server.vocab.decode([i for c in tokens for i in c["tokens"]]).startswith("print(1)\n<")
    assert "completion_probabilities" not in tokens[-1]
    assert (final["stop"], final["stop_type"], final["stopping_word"]) == (True, "word", "<result>")


def test_faults_break_the_stream_as_an_error_event_a_cut_or_a_bad_line() -> None:
    with FakeOpenAI("vllm") as server:
        server.set_responder(lambda path, body: "a fairly long answer to stream")
        server.fail_next(Fault("error_line", message="boom"), Fault("status", 429, seconds=3))
        assert events(server)[-1] == {"error": {"message": "boom", "code": 500}}
        r = httpx.post(f"{server.api}/chat/completions", json=CHAT)
        assert (r.status_code, r.headers["retry-after"]) == (429, "3")
        assert r.json()["error"]["code"] == 429
