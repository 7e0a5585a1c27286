"""The loopback Ollama server speaks Ollama's wire format and misbehaves on demand."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import orjson
import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply, tokenize

CHAT = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": False}


def chat(server: FakeOllama, **extra: Any) -> dict[str, Any]:
    """The whole answer to a chat request, as tracegen asks for it (``stream: false``)."""
    r = httpx.post(f"{server.url}/api/chat", json={**CHAT, **extra})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    answer: dict[str, Any] = r.json()
    return answer


def test_pseudo_tokens_rebuild_the_text() -> None:
    text = "def f(x):\n\n    return x  # done"
    assert "".join(tokenize(text)) == text
    assert len(tokenize(text)) > 5


def test_chat_answers_content_thinking_logprobs_and_counts(fake_ollama: FakeOllama) -> None:
    fake_ollama.script(Reply(content="The answer is 42.", thinking="Let me think."))
    answer = chat(fake_ollama, logprobs=True, top_logprobs=3)
    assert answer["message"]["content"] == "The answer is 42."
    assert answer["message"]["thinking"] == "Let me think."
    tokens = answer["logprobs"]
    assert "".join(t["token"] for t in tokens) == "Let me think.The answer is 42."
    assert all(len(t["top_logprobs"]) == 3 for t in tokens)
    assert answer["done"] is True and answer["done_reason"] == "stop"
    assert answer["eval_count"] == len(tokens) and answer["prompt_eval_count"] > 0


def test_a_streamed_request_is_refused(fake_ollama: FakeOllama) -> None:
    """tracegen never streams: a request that would be streamed is a bug the stand-in catches."""
    for stream in ({"stream": True}, {}):
        body = {k: v for k, v in CHAT.items() if k != "stream"} | stream
        r = httpx.post(f"{fake_ollama.url}/api/chat", json=body)
        assert r.status_code == 400 and "stream" in r.json()["error"]


def test_no_logprobs_unless_asked_or_when_the_reply_has_none(fake_ollama: FakeOllama) -> None:
    fake_ollama.script("plain", Reply(content="cloud", logprobs=False))
    assert "logprobs" not in chat(fake_ollama)
    assert "logprobs" not in chat(fake_ollama, logprobs=True)


def test_stop_cuts_before_the_stop_string_and_num_predict_cuts_by_tokens(
    fake_ollama: FakeOllama,
) -> None:
    text = "<code>print(1)</code>\n<result>1</result>"
    fake_ollama.set_responder(lambda path, body: text)
    answer = chat(fake_ollama, options={"stop": ["<result>"]})
    assert answer["message"]["content"] == "<code>print(1)</code>\n"
    assert answer["done_reason"] == "stop"
    answer = chat(fake_ollama, options={"num_predict": 2})
    assert answer["message"]["content"] == "".join(tokenize(text)[:2])
    assert answer["done_reason"] == "length"


def test_tool_calls_come_in_the_message(fake_ollama: FakeOllama) -> None:
    call = {"function": {"name": "python", "arguments": {"code": "print(1)"}}}
    fake_ollama.script(Reply(tool_calls=[call]))
    assert chat(fake_ollama)["message"]["tool_calls"] == [call]


def test_bad_requests_are_answered_like_ollama(fake_ollama: FakeOllama) -> None:
    url = fake_ollama.url
    r = httpx.post(f"{url}/api/chat", json={**CHAT, "model": "nope"})
    assert (r.status_code, r.json()) == (404, {"error": "model 'nope' not found"})
    assert httpx.post(f"{url}/api/show", json={"model": "nope"}).status_code == 404
    r = httpx.post(f"{url}/api/chat", json={**CHAT, "logprobs": True, "top_logprobs": 21})
    assert (r.status_code, r.json()["error"]) == (400, "top_logprobs must be between 0 and 20")
    r = httpx.post(f"{url}/api/chat", json={**CHAT, "options": {"stop": "x"}})
    assert r.status_code == 500


def test_metadata_endpoints_answer_from_models() -> None:
    with FakeOllama(models={"a:7b": ["completion"], "b": ["completion", "tools"]}) as server:
        assert httpx.get(f"{server.url}/api/version").json()["version"]
        names = [m["name"] for m in httpx.get(f"{server.url}/api/tags").json()["models"]]
        assert names == ["a:7b", "b"]
        show = httpx.post(f"{server.url}/api/show", json={"model": "b:latest"}).json()
        assert show["capabilities"] == ["completion", "tools"]


def test_debug_render_leaves_a_trailing_assistant_message_open(fake_ollama: FakeOllama) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>"}]
    r = httpx.post(
        f"{fake_ollama.url}/api/chat",
        json={**CHAT, "messages": messages, "_debug_render_only": True},
    )
    assert r.json()["_debug_info"]["rendered_template"].endswith("<|im_start|>assistant\n<think>")


def test_script_answers_in_order_then_500(fake_ollama: FakeOllama) -> None:
    fake_ollama.script("one", "two")
    for expected in ("one", "two"):
        assert chat(fake_ollama)["message"]["content"] == expected
    r = httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT)
    assert (r.status_code, r.json()) == (500, {"error": "script exhausted"})


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
def test_status_faults_answer_with_an_error_body(fake_ollama: FakeOllama, status: int) -> None:
    fake_ollama.fail_next(Fault("status", status=status))
    r = httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT)
    assert r.status_code == status and r.json()["error"]
    assert httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT).status_code == 200


def test_faults_take_the_answers_place(fake_ollama: FakeOllama) -> None:
    fake_ollama.set_responder(lambda path, body: "a fairly long answer")
    fake_ollama.fail_next(
        Fault("error_line", message="runner crashed"), Fault("malformed"), Fault("drop")
    )
    r = httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT)
    assert (r.status_code, r.json()) == (500, {"error": "runner crashed"})
    r = httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(r.content)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT)
    assert fake_ollama.faults_injected == {"error_line": 1, "malformed": 1, "drop": 1}


def test_random_faults_follow_the_seed() -> None:
    kinds: list[dict[str, int]] = []
    for _ in range(2):
        with FakeOllama() as server:
            server.fail_randomly(0.5, ["status", "error_line"], seed=7)
            for _ in range(10):
                httpx.post(f"{server.url}/api/chat", json=CHAT)
            kinds.append(dict(server.faults_injected))
    assert kinds[0] == kinds[1] and sum(kinds[0].values()) > 0


def test_parallel_bounds_requests_served_at_once() -> None:
    with FakeOllama(parallel=1, latency_s=0.05) as server:
        threads = [
            threading.Thread(
                target=httpx.post, args=(f"{server.url}/api/chat",), kwargs={"json": CHAT}
            )
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.max_in_flight == 1
        assert server.paths() == ["/api/chat"] * 3


def test_requests_are_recorded_with_headers(fake_ollama: FakeOllama) -> None:
    httpx.post(f"{fake_ollama.url}/api/chat", json=CHAT, headers={"Authorization": "Bearer k"})
    path, body, headers = fake_ollama.requests[0]
    assert (path, body["model"], headers["authorization"]) == (
        "/api/chat",
        "test-model",
        "Bearer k",
    )
