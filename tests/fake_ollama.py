"""A loopback Ollama server for tests: real HTTP on 127.0.0.1, Ollama's wire format, faults.

Wire format followed, from ollama/ollama: ``docs/openapi.yaml`` @ 82360f08 (ChatRequest,
ChatStreamEvent, GenerateRequest, Logprob/TokenLogprob, ShowResponse.capabilities);
``docs/api/streaming.mdx`` @ fe9298a5 and ``docs/api/errors.mdx`` @ e99f4b9a (NDJSON chunks,
``{"error"}`` bodies, an error after streaming began is an ``{"error"}`` line with status 200);
``api/types.go`` of v0.12.11+ (top-level ``logprobs`` per chunk, ``_debug_render_only`` answered
with ``_debug_info.rendered_template``); ``server/routes.go`` (``top_logprobs must be between 0
and 20`` → 400, ``model 'x' not found`` → 404, the debug render is one JSON object).

Simplifications: pseudo-tokens are small whitespace-preserving pieces of the reply text; the chat
template is ChatML-like and leaves a trailing assistant message open (prefill); only the inference
endpoints (``/api/chat``, ``/api/generate``) take faults, latency and ``parallel``; request header
names are recorded lower-cased.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
import socket
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

FAKE_VERSION = "0.13.0"
DEFAULT_MODELS = {"test-model": ["completion", "tools", "thinking"]}
DEFAULT_REPLY = "Hello from the fake Ollama server."
FAULT_KINDS = ("status", "drop", "error_line", "malformed", "stall")
_TOKEN = re.compile(r"\s?\S{1,4}|\s+")
_STATUS_MESSAGES = {
    400: "invalid request",
    401: "unauthorized",
    403: "forbidden",
    429: "too many requests: usage limit reached",
    500: "an error was encountered while running the model",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


@dataclass
class Reply:
    """What the fake model answers to one chat/generate request."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: bool = True
    tool_calls_on_final_chunk: bool = True
    done_reason: str | None = None


@dataclass
class Fault:
    """A misbehaviour for one inference request; see `FAULT_KINDS`."""

    kind: str
    status: int | None = None
    message: str | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(FAULT_KINDS)}")


Responder = Callable[[str, dict[str, Any]], "Reply | str | None"]
Headers = dict[str, str]


def tokenize(text: str) -> list[str]:
    """Split text into pseudo-tokens whose concatenation is the text."""
    return _TOKEN.findall(text)


def render_chat(messages: list[dict[str, Any]]) -> str:
    """ChatML-like prompt; a trailing assistant message stays open so generation continues it."""
    parts: list[str] = []
    for i, m in enumerate(messages):
        open_turn = i == len(messages) - 1 and m.get("role") == "assistant"
        end = "" if open_turn else "<|im_end|>\n"
        parts.append(f"<|im_start|>{m.get('role', '')}\n{m.get('content', '')}{end}")
    if not messages or messages[-1].get("role") != "assistant":
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _logprob(token: str, i: int, top: int) -> dict[str, Any]:
    value = -round(0.01 + (i % 7) * 0.13, 4)
    entry: dict[str, Any] = {"token": token, "logprob": value, "bytes": list(token.encode())}
    if top:
        alts = [{"token": token, "logprob": value, "bytes": list(token.encode())}]
        alts += [
            {"token": f"alt{j}", "logprob": round(value - j, 4), "bytes": list(f"alt{j}".encode())}
            for j in range(1, top)
        ]
        entry["top_logprobs"] = alts
    return entry


def _cut(text: str, stops: list[str], num_predict: int | None) -> tuple[str, str | None]:
    """Apply ``stop`` and ``num_predict`` like Ollama; the reason is None when neither cut."""
    hits = [p for p in (text.find(s) for s in stops if s) if p >= 0]
    stop_at = min(hits) if hits else None
    tokens = tokenize(text)
    limit = len(text)
    if num_predict is not None and 0 < num_predict < len(tokens):
        limit = len("".join(tokens[:num_predict]))
    if stop_at is not None and stop_at <= limit:
        return text[:stop_at], "stop"
    if limit < len(text):
        return text[:limit], "length"
    return text, None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # like Go's listener; 5 resets bursts of new connections
    fake: FakeOllama

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-response is normal; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOllama:
    """A real HTTP server on 127.0.0.1 speaking Ollama's native API; see the module docstring."""

    def __init__(
        self,
        models: dict[str, list[str]] | None = None,
        parallel: int | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.models = dict(models) if models is not None else dict(DEFAULT_MODELS)
        self.latency_s = latency_s
        self.requests: list[tuple[str, dict[str, Any], Headers]] = []
        self.faults_injected: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._slots = threading.BoundedSemaphore(parallel) if parallel else None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._responder: Responder | None = None
        self._script: deque[Reply | str] | None = None
        self._faults: deque[Fault] = deque()
        self._random: tuple[float, list[Fault], random.Random] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeOllama:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOllama is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------ behaviour

    def set_responder(self, fn: Responder) -> None:
        """Answer chat/generate requests with ``fn(path, body)``; ``None`` is a 500 ``no reply``."""
        self._responder = fn

    def script(self, *replies: Reply | str) -> None:
        """Answer successive chat/generate requests in order, then 500 ``script exhausted``."""
        with self._lock:
            self._script = deque(replies)

    def fail_next(self, *faults: Fault) -> None:
        """Queue faults for the next chat/generate requests, one each."""
        with self._lock:
            self._faults.extend(faults)

    def fail_randomly(self, rate: float, kinds: list[str | Fault], seed: int) -> None:
        """Inject a fault of a random kind into a ``rate`` fraction of chat/generate requests.

        A kind is a name (default status, message and stall) or a `Fault` used as it is, for
        example ``Fault("status", 429)`` or ``Fault("stall", seconds=2)``.
        """
        faults = [k if isinstance(k, Fault) else Fault(k) for k in kinds]
        self._random = (rate, faults, random.Random(seed))

    def paths(self) -> list[str]:
        """The paths of every request seen, in order."""
        return [p for p, _, _ in self.requests]

    # ------------------------------------------------------------ internals

    def _record(self, path: str, body: dict[str, Any], headers: Headers) -> None:
        with self._lock:
            self.requests.append((path, body, headers))

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self._faults:
                fault = self._faults.popleft()
            elif self._random is not None and self._random[2].random() < self._random[0]:
                _, faults, rng = self._random
                fault = rng.choice(faults)
            else:
                return None
            self.faults_injected[fault.kind] += 1
            return fault

    def _reply(self, path: str, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            script = self._script
            if script is not None:
                if not script:
                    return None
                answer: Reply | str | None = script.popleft()
            else:
                answer = self._responder(path, body) if self._responder else DEFAULT_REPLY
        return Reply(content=answer) if isinstance(answer, str) else answer

    def _resolve(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        for candidate in (name, name.removesuffix(":latest"), f"{name}:latest"):
            if candidate in self.models:
                return candidate
        return None

    def _enter(self) -> None:
        if self._slots is not None:
            self._slots.acquire()
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1
        if self._slots is not None:
            self._slots.release()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `FakeOllama.requests` instead."""

    # ------------------------------------------------------------ plumbing

    @property
    def fake(self) -> FakeOllama:
        return self.server.fake

    def _send_json(self, status: int, obj: Any) -> None:
        data = orjson.dumps(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": message})

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _write_line(self, obj: Any) -> None:
        self._write_chunk(orjson.dumps(obj) + b"\n")

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _read_body(self) -> tuple[dict[str, Any] | None, Headers]:
        headers = {k.lower(): v for k, v in self.headers.items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return None, headers
        return (body if isinstance(body, dict) else None), headers

    # ------------------------------------------------------------ routes

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake._record(self.path, {}, headers)
        if self.path == "/":
            data = b"Ollama is running"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path == "/api/version":
            self._send_json(200, {"version": FAKE_VERSION})
        elif self.path == "/api/tags":
            self._send_json(200, {"models": [self._model_entry(n) for n in self.fake.models]})
        else:
            self._error(404, "404 page not found")

    def do_POST(self) -> None:
        body, headers = self._read_body()
        self.fake._record(self.path, body or {}, headers)
        if body is None:
            self._error(400, "invalid request body")
        elif self.path == "/api/show":
            self._show(body)
        elif self.path in ("/api/chat", "/api/generate"):
            self.fake._enter()
            try:
                self._infer(body)
            finally:
                self.fake._leave()
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
        name = self.fake._resolve(body.get("model"))
        if name is None:
            self._error(404, f"model '{body.get('model')}' not found")
            return
        entry = self._model_entry(name)
        self._send_json(
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
        fake._sleep(fake.latency_s)
        fault = fake._next_fault()
        if fault is not None and fault.kind == "stall":
            fake._sleep(1.0 if fault.seconds is None else fault.seconds)
            fault = None
        if fault is not None and fault.kind == "status":
            status = fault.status or 503
            default = _STATUS_MESSAGES.get(status, "error")
            if status == 404:
                default = f"model '{body.get('model')}' not found"
            self._error(status, fault.message or default)
            return
        problem = self._validate(body)
        if problem is not None:
            self._error(*problem)
            return
        is_chat = self.path == "/api/chat"
        if is_chat and body.get("_debug_render_only"):
            info = {"rendered_template": render_chat(body.get("messages") or [])}
            message = {"role": "", "content": ""}
            self._send_json(
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
        reply = fake._reply(self.path, body)
        if reply is None:
            self._error(500, "script exhausted" if fake._script is not None else "no reply")
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
        name = self.fake._resolve(body["model"])
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
        content, cut_reason = _cut(reply.content, stops, num_predict)
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
                chunk["logprobs"] = [_logprob(token, i, top)]
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
        self._start_stream()
        head = min(2, len(chunks) - 1)
        for n, chunk in enumerate(chunks):
            if fault is not None and n == head:
                if fault.kind == "drop":
                    self._drop()
                    return
                if fault.kind == "error_line":
                    self._write_line({"error": fault.message or _STATUS_MESSAGES[500]})
                    self._end_stream()
                    return
                if fault.kind == "malformed":
                    self._write_chunk(b'{"model": "test", "message": {"content": \n')
            self._write_line(chunk)
        self._end_stream()

    def _send_whole(self, chunks: list[dict[str, Any]], is_chat: bool, fault: Fault | None) -> None:
        if fault is not None and fault.kind == "drop":
            self._drop()
            return
        if fault is not None and fault.kind == "error_line":
            self._error(500, fault.message or _STATUS_MESSAGES[500])
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
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._send_json(200, whole)
