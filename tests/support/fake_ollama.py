"""A loopback Ollama server for tests: real HTTP on 127.0.0.1, Ollama's wire format, faults.

Wire format followed, from ollama/ollama: ``docs/openapi.yaml`` @ 82360f08 (ChatRequest,
ChatStreamEvent, GenerateRequest, Logprob/TokenLogprob, ShowResponse.capabilities);
``docs/api/streaming.mdx`` @ fe9298a5 (``stream: false``) and ``docs/api/errors.mdx`` @ e99f4b9a
(``{"error"}`` bodies); ``api/types.go`` of v0.12.11+ (top-level ``logprobs``,
``_debug_render_only`` answered with ``_debug_info.rendered_template``); ``server/routes.go``
(``top_logprobs must be between 0 and 20`` → 400, ``model 'x' not found`` → 404, the debug
render is one JSON object).

The scripted model (replies, faults, latency, ``parallel``, pseudo-tokens, cutting by ``stop`` and
``num_predict``) is `tests.support.fake_model`'s, shared with the OpenAI-compatible stand-in.
A fault takes the answer's place: ``drop`` closes the connection, ``error_line`` is the error
status (500 unless given) Ollama answers when generating fails, ``malformed`` a body cut short,
``wire`` bytes `tests.support.hostile_wire` makes of it.
Simplifications: answers are whole only, as tracegen asks (``stream: false``); a request that
does not say so is a 400, where Ollama would stream NDJSON chunks. The chat template is
ChatML-like and leaves a trailing assistant message open (prefill); only the inference
endpoints (``/api/chat``, ``/api/generate``) take faults, latency and ``parallel``; request
header names are recorded lower-cased.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson

from tests.support.fake_model import (
    DEFAULT_REPLY,
    FAULT_KINDS,
    STATUS_MESSAGES,
    FakeModel,
    Fault,
    Handler,
    Reply,
    cut,
    logprob_entry,
    render_chat,
    tokenize,
)
from tests.support.hostile_wire import misbehave

__all__ = [
    "DEFAULT_REPLY",
    "FAULT_KINDS",
    "FakeOllama",
    "Fault",
    "Reply",
    "render_chat",
    "tokenize",
]

FAKE_VERSION = "0.13.0"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Handler(Handler):
    @property
    def fake(self) -> FakeOllama:
        return self.server.fake  # type: ignore[return-value]

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.send_json(status, {"error": message}, headers)

    # ------------------------------------------------------------ routes

    def do_GET(self) -> None:
        self.fake.record(self.path, {}, self.headers_seen())
        if self.path == "/":
            self.send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")
        elif self.path == "/api/version":
            self.send_json(200, {"version": FAKE_VERSION})
        elif self.path == "/api/tags":
            self.send_json(200, {"models": [self._model_entry(n) for n in self.fake.models]})
        else:
            self._error(404, "404 page not found")

    def do_POST(self) -> None:
        body = self.read_body()
        self.fake.record(self.path, body or {}, self.headers_seen())
        if body is None:
            self._error(400, "invalid request body")
        elif self.path == "/api/show":
            self._show(body)
        elif self.path in ("/api/chat", "/api/generate"):
            with self.fake.serving():
                self._infer(body)
        else:
            self._error(404, "404 page not found")

    def _model_entry(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "model": name,
            "modified_at": "2025-01-01T00:00:00Z",
            "size": 1_000_000,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": {"format": "gguf", "family": "fake", "parameter_size": "1B"},
        }

    def _show(self, body: dict[str, Any]) -> None:
        name = self.fake.resolve(body.get("model"))
        if name is None:
            self._error(404, f"model '{body.get('model')}' not found")
            return
        entry = self._model_entry(name)
        self.send_json(
            200,
            {
                "parameters": 'stop "<|im_end|>"',
                "template": "{{ .Prompt }}",
                "details": entry["details"],
                "model_info": {"general.architecture": "fake"},
                "capabilities": self.fake.models[name],
                "modified_at": entry["modified_at"],
            },
        )

    # ------------------------------------------------------------ inference

    def _infer(self, body: dict[str, Any]) -> None:
        fake = self.fake
        fault = fake.take_fault()
        if fault is not None and fault.kind == "status":
            status = fault.status or 503
            default = STATUS_MESSAGES.get(status, "error")
            if status == 404:
                default = f"model '{body.get('model')}' not found"
            after = {"Retry-After": f"{fault.seconds:g}"} if fault.seconds is not None else None
            self._error(status, fault.message or default, after)
            return
        problem = self._validate(body)
        if problem is not None:
            self._error(*problem)
            return
        is_chat = self.path == "/api/chat"
        if is_chat and body.get("_debug_render_only"):
            info = {"rendered_template": render_chat(body.get("messages") or [])}
            message = {"role": "", "content": ""}
            self.send_json(
                200,
                {
                    "model": body["model"],
                    "created_at": _now(),
                    "message": message,
                    "done": False,
                    "_debug_info": info,
                },
            )
            return
        reply = fake.reply(self.path, body)
        if reply is None:
            self._error(500, fake.no_reply_message())
            return
        self._send_whole(body, reply, is_chat, fault)

    def _validate(self, body: dict[str, Any]) -> tuple[int, str] | None:
        if not body.get("model"):
            return 400, "model is required"
        if body.get("stream") is not False:
            return 400, "this stand-in answers only non-streamed requests (stream: false)"
        top = body.get("top_logprobs", 0)
        if not isinstance(top, int) or not 0 <= top <= 20:
            return 400, "top_logprobs must be between 0 and 20"
        options = body.get("options") or {}
        if "stop" in options and not isinstance(options["stop"], list):
            return 500, 'option "stop" must be of type array'
        name = self.fake.resolve(body["model"])
        if name is None:
            return 404, f"model '{body['model']}' not found"
        caps = self.fake.models[name]
        if body.get("tools") and "tools" not in caps:
            return 400, f"{body['model']} does not support tools"
        if body.get("think") and "thinking" not in caps:
            return 400, f'"{body["model"]}" does not support thinking'
        return None

    def _answer(self, body: dict[str, Any], reply: Reply, is_chat: bool) -> dict[str, Any]:
        """The whole answer: the reply's text cut by ``stop`` and ``num_predict``, its
        pseudo-tokens' logprobs, and the final fields (``done_reason``, counts, durations)."""
        options = body.get("options") or {}
        content, cut_reason = cut(
            reply.content, options.get("stop") or [], options.get("num_predict")
        )
        thinking = reply.thinking if body.get("think") is not False else ""
        pieces = tokenize(thinking) + tokenize(content)
        answer: dict[str, Any] = {"model": body["model"], "created_at": _now()}
        if is_chat:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking:
                message["thinking"] = thinking
            if reply.tool_calls:
                message["tool_calls"] = reply.tool_calls
            answer["message"] = message
        else:
            answer["response"] = content
            if thinking:
                answer["thinking"] = thinking
        prompt = render_chat(body.get("messages") or []) if is_chat else body.get("prompt", "")
        self.fake.prompts.append(prompt)
        answer["done"] = True
        answer["done_reason"] = cut_reason or reply.done_reason or "stop"
        metrics = {
            "total_duration": 1_000_000 + 20_000_000 * len(pieces),
            "load_duration": 1_000_000,
            "prompt_eval_count": len(tokenize(prompt)),
            "prompt_eval_duration": 10_000 * len(tokenize(prompt)),
            "eval_count": len(pieces),
            "eval_duration": 20_000_000 * len(pieces),
        }
        answer.update({k: v for k, v in metrics.items() if v})
        if body.get("logprobs") and reply.logprobs and pieces:
            top = int(body.get("top_logprobs") or 0)
            answer["logprobs"] = [logprob_entry(t, i, top) for i, t in enumerate(pieces)]
        return answer

    def _send_whole(
        self, body: dict[str, Any], reply: Reply, is_chat: bool, fault: Fault | None
    ) -> None:
        if fault is not None and fault.kind == "drop":
            self.drop()
            return
        if fault is not None and fault.kind == "error_line":
            self._error(fault.status or 500, fault.message or STATUS_MESSAGES[500])
            return
        answer = self._answer(body, reply, is_chat)
        if fault is not None and fault.kind == "malformed":
            key = "message" if is_chat else "response"
            data = orjson.dumps(answer)[: -len(key)]
            self.send_bytes(200, data, "application/json; charset=utf-8")
            return
        if fault is not None and fault.kind == "wire":
            misbehave(self, orjson.dumps(answer), fault)
            return
        self.send_json(200, answer)


class FakeOllama(FakeModel):
    """A real HTTP server on 127.0.0.1 speaking Ollama's native API; see the module docstring."""

    handler = _Handler

    def start(self) -> FakeOllama:
        super().start()
        return self

    def __enter__(self) -> FakeOllama:
        return self.start()
