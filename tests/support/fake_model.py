"""What the loopback model servers share, whatever wire format they speak: the scripted model.

`FakeModel` owns a server's behaviour: which reply each inference request gets (a script, a
responder or the default), which fault it meets (queued, or at random with a seed), latency,
a bound on requests served at once, and a record of every request. A wire module (`fake_ollama`,
`fake_openai` beside this one) subclasses it with its routes and framing. The model's text is
cut into pseudo-tokens (small whitespace-preserving pieces) with ids from a `Vocab`; ``stop``
strings and a token budget cut a reply as servers do.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import orjson

DEFAULT_REPLY = "Hello from the fake model server."
FAULT_KINDS = ("status", "drop", "error_line", "malformed", "stall", "wire")
SPECIAL_TOKENS = {"<|im_start|>": 1, "<|im_end|>": 2}
END_OF_TURN = "<|im_end|>"
_TOKEN = re.compile(r"\s?\S{1,4}|\s+")
_SPECIAL = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
STATUS_MESSAGES = {
    400: "invalid request",
    401: "unauthorized",
    403: "forbidden",
    429: "too many requests: usage limit reached",
    500: "an error was encountered while running the model",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


@dataclass
class Reply:
    """What the fake model answers to one inference request."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    """In Ollama's shape: ``[{"function": {"name": …, "arguments": {…}}}]``."""
    logprobs: bool = True
    done_reason: str | None = None
    by_character: bool = False
    """llama.cpp's ``/completion`` samples one character per token: a tokenization of the text
    its ``/tokenize`` never gives, as a real model sometimes samples."""


@dataclass
class Fault:
    """A misbehaviour for one inference request; see `FAULT_KINDS`. ``seconds`` is how long a
    ``stall`` lasts, or the ``Retry-After`` a ``status`` fault sends (none when unset). A
    ``wire`` fault sends, in place of the answer, the bytes `tests.support.hostile_wire`'s
    misbehaviour named by ``message`` makes of it."""

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


def render_chat(messages: list[dict[str, Any]], *, open_last: bool = True) -> str:
    """ChatML-like prompt. A trailing assistant message stays open (prefill) when ``open_last``;
    otherwise it is closed and a new assistant turn begins."""
    parts: list[str] = []
    for i, m in enumerate(messages):
        open_turn = open_last and i == len(messages) - 1 and m.get("role") == "assistant"
        end = "" if open_turn else f"{END_OF_TURN}\n"
        parts.append(f"<|im_start|>{m.get('role', '')}\n{m.get('content') or ''}{end}")
    if not (open_last and messages and messages[-1].get("role") == "assistant"):
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def logprob_entry(token: str, i: int, top: int) -> dict[str, Any]:
    """A made-up logprob for the ``i``-th token, with ``top`` alternatives."""
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


def sampled_pieces(text: str, by_character: bool = False) -> list[str]:
    """The pieces the model samples for ``text``: its pseudo-tokens, or its characters."""
    return list(text) if by_character else tokenize(text)


def cut(
    text: str, stops: list[str], max_tokens: int | None, by_character: bool = False
) -> tuple[str, str | None]:
    """Apply ``stop`` strings and a token budget; the reason is None when neither cut."""
    hits = [p for p in (text.find(s) for s in stops if s) if p >= 0]
    stop_at = min(hits) if hits else None
    tokens = sampled_pieces(text, by_character)
    limit = len(text)
    if max_tokens is not None and 0 < max_tokens < len(tokens):
        limit = len("".join(tokens[:max_tokens]))
    if stop_at is not None and stop_at <= limit:
        return text[:stop_at], "stop"
    if limit < len(text):
        return text[:limit], "length"
    return text, None


class Vocab:
    """Token ids of pseudo-tokens: the special tokens have fixed ids, others are numbered from
    100 as they are first seen, so ids and text convert both ways."""

    def __init__(self) -> None:
        self._ids = dict(SPECIAL_TOKENS)
        self._pieces = {i: t for t, i in SPECIAL_TOKENS.items()}
        self._lock = threading.Lock()

    def id(self, piece: str) -> int:
        with self._lock:
            if piece not in self._ids:
                self._ids[piece] = 100 + len(self._ids)
                self._pieces[self._ids[piece]] = piece
            return self._ids[piece]

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``, special tokens parsed."""
        ids: list[int] = []
        for part in _SPECIAL.split(text):
            if part in SPECIAL_TOKENS:
                ids.append(SPECIAL_TOKENS[part])
            else:
                ids.extend(self.id(t) for t in tokenize(part))
        return ids

    def decode(self, ids: list[int]) -> str:
        with self._lock:
            return "".join(self._pieces.get(i, "") for i in ids)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # like Go's listener; 5 resets bursts of new connections
    fake: FakeModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-response is normal; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeModel:
    """A real HTTP server on 127.0.0.1 whose model is scripted; subclasses give the routes."""

    handler: ClassVar[type[BaseHTTPRequestHandler]]
    default_models: ClassVar[dict[str, list[str]]] = {
        "test-model": ["completion", "tools", "thinking"]
    }

    def __init__(
        self,
        models: dict[str, list[str]] | None = None,
        parallel: int | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.models = dict(models) if models is not None else dict(self.default_models)
        self.latency_s = latency_s
        self.requests: list[tuple[str, dict[str, Any], Headers]] = []
        self.prompts: list[str] = []
        """Each prompt the model was given, rendered, in order."""
        self.faults_injected: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.vocab = Vocab()
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

    def start(self) -> FakeModel:
        server = _Server(("127.0.0.1", 0), self.handler)
        server.fake = self
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
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

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------ behaviour

    def set_responder(self, fn: Responder) -> None:
        """Answer inference requests with ``fn(path, body)``; ``None`` is a 500 ``no reply``."""
        self._responder = fn

    def script(self, *replies: Reply | str) -> None:
        """Answer successive inference requests in order, then 500 ``script exhausted``."""
        with self._lock:
            self._script = deque(replies)

    def fail_next(self, *faults: Fault) -> None:
        """Queue faults for the next inference requests, one each."""
        with self._lock:
            self._faults.extend(faults)

    def fail_randomly(self, rate: float, kinds: list[str | Fault], seed: int) -> None:
        """Inject a fault of a random kind into a ``rate`` fraction of inference requests.

        A kind is a name (default status, message and stall) or a `Fault` used as it is, for
        example ``Fault("status", 429)`` or ``Fault("stall", seconds=2)``.
        """
        faults = [k if isinstance(k, Fault) else Fault(k) for k in kinds]
        self._random = (rate, faults, random.Random(seed))

    def paths(self) -> list[str]:
        """The paths of every request seen, in order."""
        return [p for p, _, _ in self.requests]

    # ------------------------------------------------------------ for the wire modules

    def record(self, path: str, body: dict[str, Any], headers: Headers) -> None:
        with self._lock:
            self.requests.append((path, body, headers))

    def take_fault(self) -> Fault | None:
        """After the latency, the fault this inference request meets; a stall is served here
        (the request is then answered normally)."""
        self.sleep(self.latency_s)
        fault = self._next_fault()
        if fault is not None and fault.kind == "stall":
            self.sleep(1.0 if fault.seconds is None else fault.seconds)
            return None
        return fault

    def reply(self, path: str, body: dict[str, Any]) -> Reply | None:
        """The scripted answer to this request; None when there is none (a 500)."""
        with self._lock:
            script = self._script
            if script is not None:
                if not script:
                    return None
                answer: Reply | str | None = script.popleft()
            else:
                answer = self._responder(path, body) if self._responder else DEFAULT_REPLY
        return Reply(content=answer) if isinstance(answer, str) else answer

    def no_reply_message(self) -> str:
        return "script exhausted" if self._script is not None else "no reply"

    def resolve(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        for candidate in (name, name.removesuffix(":latest"), f"{name}:latest"):
            if candidate in self.models:
                return candidate
        return None

    @contextlib.contextmanager
    def serving(self) -> Any:
        """One inference request in flight (waiting for a slot when ``parallel`` is set)."""
        if self._slots is not None:
            self._slots.acquire()
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1
            if self._slots is not None:
                self._slots.release()

    @property
    def stopping(self) -> threading.Event:
        """Set once the server is stopping: a misbehaviour without end ends then."""
        return self._stopping

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

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


class Handler(BaseHTTPRequestHandler):
    """HTTP plumbing the wire modules' handlers share."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small writes go out at once, as from a real server
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `FakeModel.requests` instead."""

    @property
    def model(self) -> FakeModel:
        return self.server.fake

    def headers_seen(self) -> Headers:
        return {k.lower(): v for k, v in self.headers.items()}

    def send_json(self, status: int, obj: Any, headers: Headers | None = None) -> None:
        self.send_bytes(status, orjson.dumps(obj), "application/json; charset=utf-8", headers)

    def send_bytes(
        self, status: int, data: bytes, content_type: str, headers: Headers | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def read_body(self) -> dict[str, Any] | None:
        """The JSON object sent, ``{}`` for none, None when it is not a JSON object."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
