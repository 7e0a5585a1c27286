"""A loopback Ollama server for tests: real HTTP on 127.0.0.1, Ollama's wire format, faults.

Wire format followed, from ollama/ollama: ``docs/openapi.yaml`` @ 82360f08 (ChatRequest,
ChatStreamEvent, GenerateRequest, Logprob/TokenLogprob, ShowResponse.capabilities);
``docs/api/streaming.mdx`` @ fe9298a5 and ``docs/api/errors.mdx`` @ e99f4b9a (NDJSON chunks,
``{"error"}`` bodies, an error after streaming began is an ``{"error"}`` line with status 200);
``api/types.go`` of v0.12.11+ (top-level ``logprobs`` per chunk, ``_debug_render_only`` answered
with ``_debug_info.rendered_template``); ``server/routes.go`` (``top_logprobs must be between 0
and 20`` → 400, ``model 'x' not found`` → 404, the debug render is one JSON object).

The scripted model (replies, faults, latency, ``parallel``, pseudo-tokens, cutting by ``stop`` and
``num_predict``) is `tests.support.fake_model`'s, shared with the OpenAI-compatible stand-in.
Simplifications: the chat template is ChatML-like and leaves a trailing assistant message open
(prefill); only the inference endpoints (``/api/chat``, ``/api/generate``) take faults, latency
and ``parallel``; request header names are recorded lower-cased.
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
    fault_position,
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

    def _write_line(self, obj: Any) -> None:
        self.write_chunk(orjson.dumps(obj) + b"\n")

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
        self._stream(body, reply, is_chat, fault)

    def _validate(self, body: dict[str, Any]) -> tuple[int, str] | None:
        if not body.get("model"):
            return 400, "model is required"
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

    def _chunks(self, body: dict[str, Any], reply: Reply, is_chat: bool) -> list[dict[str, Any]]:
        options = body.get("options") or {}
        stops = options.get("stop") or []
        num_predict = options.get("num_predict")
        content, cut_reason = cut(reply.content, stops, num_predict)
        thinking = reply.thinking if body.get("think") is not False else ""
        want_logprobs = bool(body.get("logprobs")) and reply.logprobs
        top = int(body.get("top_logprobs") or 0)
        model = body["model"]
        pieces = [("thinking", t) for t in tokenize(thinking)]
        pieces += [("content", t) for t in tokenize(content)]
        chunks: list[dict[str, Any]] = []
        for i, (field_name, token) in enumerate(pieces):
            chunk: dict[str, Any] = {"model": model, "created_at": _now()}
            if is_chat:
                message = {"role": "assistant", "content": ""}
                message[field_name] = token
                chunk["message"] = message
            else:
                chunk["response"] = token if field_name == "content" else ""
                if field_name == "thinking":
                    chunk["thinking"] = token
            chunk["done"] = False
            if want_logprobs:
                chunk["logprobs"] = [logprob_entry(token, i, top)]
            chunks.append(chunk)
        calls = reply.tool_calls if is_chat else None
        if calls and not reply.tool_calls_on_final_chunk:
            message = {"role": "assistant", "content": "", "tool_calls": calls}
            chunks.append({"model": model, "created_at": _now(), "message": message, "done": False})
        final: dict[str, Any] = {"model": model, "created_at": _now()}
        if is_chat:
            final["message"] = {"role": "assistant", "content": ""}
            if calls and reply.tool_calls_on_final_chunk:
                final["message"]["tool_calls"] = calls
        else:
            final["response"] = ""
        prompt = render_chat(body.get("messages") or []) if is_chat else body.get("prompt", "")
        self.fake.prompts.append(prompt)
        final["done"] = True
        final["done_reason"] = cut_reason or reply.done_reason or "stop"
        metrics = {
            "total_duration": 1_000_000 + 20_000_000 * len(pieces),
            "load_duration": 1_000_000,
            "prompt_eval_count": len(tokenize(prompt)),
            "prompt_eval_duration": 10_000 * len(tokenize(prompt)),
            "eval_count": len(pieces),
            "eval_duration": 20_000_000 * len(pieces),
        }
        final.update({k: v for k, v in metrics.items() if v})
        chunks.append(final)
        return chunks

    def _stream(
        self, body: dict[str, Any], reply: Reply, is_chat: bool, fault: Fault | None
    ) -> None:
        chunks = self._chunks(body, reply, is_chat)
        if body.get("stream") is False:
            self._send_whole(chunks, is_chat, fault)
            return
        self.start_stream("application/x-ndjson")
        head = fault_position(len(chunks))
        for n, chunk in enumerate(chunks):
            if fault is not None and n == head:
                if fault.kind == "drop":
                    self.drop()
                    return
                if fault.kind == "error_line":
                    self._write_line({"error": fault.message or STATUS_MESSAGES[500]})
                    self.end_stream()
                    return
                if fault.kind == "malformed":
                    self.write_chunk(b'{"model": "test", "message": {"content": \n')
            self._write_line(chunk)
        self.end_stream()

    def _send_whole(self, chunks: list[dict[str, Any]], is_chat: bool, fault: Fault | None) -> None:
        if fault is not None and fault.kind == "drop":
            self.drop()
            return
        if fault is not None and fault.kind == "error_line":
            self._error(500, fault.message or STATUS_MESSAGES[500])
            return
        whole = dict(chunks[-1])
        key = "message" if is_chat else "response"
        if is_chat:
            message = dict(whole["message"])
            for c in chunks[:-1]:
                for k, v in c["message"].items():
                    if k in ("content", "thinking"):
                        message[k] = message.get(k, "") + v
                    elif k == "tool_calls":
                        message[k] = v
            whole[key] = message
        else:
            whole[key] = "".join(c["response"] for c in chunks[:-1])
            thinking = "".join(c.get("thinking", "") for c in chunks[:-1])
            if thinking:
                whole["thinking"] = thinking
        logprobs = [lp for c in chunks for lp in c.get("logprobs", [])]
        if logprobs:
            whole["logprobs"] = logprobs
        if fault is not None and fault.kind == "malformed":
            data = orjson.dumps(whole)[: -len(key)]
            self.send_bytes(200, data, "application/json; charset=utf-8")
            return
        if fault is not None and fault.kind == "wire":
            misbehave(self, orjson.dumps(whole), fault)
            return
        self.send_json(200, whole)


class FakeOllama(FakeModel):
    """A real HTTP server on 127.0.0.1 speaking Ollama's native API; see the module docstring."""

    handler = _Handler

    def start(self) -> FakeOllama:
        super().start()
        return self

    def __enter__(self) -> FakeOllama:
        return self.start()
