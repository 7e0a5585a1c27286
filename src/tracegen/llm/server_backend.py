"""The one HTTP transport every server backend shares: connections, retries, typed errors.

A backend subclasses `HttpBackend` and only describes requests and reads answers. This base
owns the transport (kept-alive connections, each answer read whole, bounded in size and time:
see `tracegen.llm.transport`), bounded retries with back-off that honours ``Retry-After``, and
the mapping of transport faults and HTTP statuses to `tracegen.errors`:

======================  ===================  =========
what happened           error                retried
======================  ===================  =========
connection refused/DNS  BackendUnavailable   yes
no answer in time       BackendTimeout       yes
connection dropped      ServerError          yes
404                     ModelNotFound        no
401, 403                AuthError            no
429, 503                Overloaded           yes
other 5xx               ServerError          yes
other 4xx               BadRequest           no
malformed HTTP or body  ProtocolError        yes
answer past its limit   AnswerTooLarge       yes
impossible token id     ImpossibleTokenId    yes
the same one twice      RepeatedAnswer       no
unreadable, N in a row  UnreadableServer     no
======================  ===================  =========

An answer may hold `answer_limit` bytes (from ``max_tokens``, logprobs counted, at least
`ANSWER_FLOOR_BYTES`; ``max_answer_bytes`` overrides it), and a request may take
``timeout_s`` in all. A server whose answers tracegen cannot read (malformed HTTP, a body
that is not JSON, too large) `UNREADABLE_IN_A_ROW` times in a row at one path is asked there no
more: that answer is an `UnreadableServer`, which stops the run, showing the first bytes sent.
An answer that cannot be read for the same reason on a request's second try as on its first
is a `RepeatedAnswer`: the request is not tried again (the episode fails); when that happens
to `REPEATS_IN_A_ROW` requests in a row the server is asked no more (`UnreadableServer`).

A retry restarts the request from scratch (a partial stream is discarded), as the backend's
`tracegen.llm.retries.RetryPolicy` says: waiting the server's ``Retry-After`` when it sent
one, else a random time up to ``retry_initial_s · 2^n`` (capped at ``retry_max_s``): at most
``max_attempts`` attempts and ``max_retry_s`` seconds of waiting in all.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, TypeVar

import httpx
import orjson

from tracegen.config import (
    REQUEST_TIMEOUT_S,
    RETRY_ATTEMPTS,
    RETRY_INITIAL_S,
    RETRY_MAX_S,
    RETRY_MAX_WAITING_S,
    RunSettings,
    env_names,
    redact_url,
)
from tracegen.errors import (
    AnswerTooLarge,
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    ConfigError,
    ModelNotFound,
    Overloaded,
    ProtocolError,
    RepeatedAnswer,
    ServerError,
    UnreadableServer,
)
from tracegen.llm.base import SESSION_ID, ChatRequest, Completion, RetryListener, ServerInfo
from tracegen.llm.retries import RetryPolicy
from tracegen.llm.transport import (
    HttpResponse,
    MalformedResponse,
    ResponseTooLarge,
    transport_for,
)

T = TypeVar("T")
Json = dict[str, Any]

PROBE_TIMEOUT_S = 10.0
"""How long a host may take to answer a probe before it counts as down."""
ANSWER_FLOOR_BYTES = 8 << 20
"""The least an answer may hold (model lists, a prompt's token ids, error pages)."""
BYTES_PER_TOKEN = 64
"""A generous share of a body per token asked for: its text, JSON-escaped, and its id."""
BYTES_PER_LOGPROB = 256
"""A sampled token's logprob entry (its text, value, bytes and id)."""
BYTES_PER_ALTERNATIVE = 192
"""Each of its ``top_logprobs`` alternatives."""
BYTES_PER_PROMPT_TOKEN = 16
"""A prompt token's id, for servers that send the prompt's ids back."""
UNREADABLE_IN_A_ROW = 5
"""Answers tracegen cannot read, one after another, before the server is asked no more."""
REPEATS_IN_A_ROW = 2
"""Requests in a row answered twice the same way tracegen cannot read before the server is
asked no more."""


def answer_limit(request: ChatRequest) -> int:
    """How many bytes an answer to ``request`` may hold: generous, from its ``max_tokens``."""
    o = request.options
    per_token = BYTES_PER_TOKEN
    if request.logprobs:
        per_token += BYTES_PER_LOGPROB + BYTES_PER_ALTERNATIVE * max(1, request.top_logprobs)
    tokens = o.max_tokens or 32_768
    prompt = (o.context_tokens or 0) * BYTES_PER_PROMPT_TOKEN
    return ANSWER_FLOOR_BYTES + tokens * per_token + prompt


def _has_userinfo(url: str) -> bool:
    try:
        parts = httpx.URL(url)
    except httpx.InvalidURL:
        return False
    return bool(parts.userinfo)


def key_variable(setting: str) -> str:
    """The environment variable a user sets the key setting ``setting`` with: the one its
    declaration names for it (`tracegen.config.env_names`; another tool's, where it reads one)."""
    return env_names(setting, RunSettings.model_fields[setting])[-1]


class HttpBackend:
    """Base of the backends that talk to a model server over HTTP (see the module docstring)."""

    server_name: ClassVar[str] = "the server"
    """How messages name the server (``Ollama``)."""
    key_variable: ClassVar[str] = "TRACEGEN_API_KEY"
    """The environment variable users set the API key with, for the 401 hint."""
    key_settings: ClassVar[tuple[str, ...]] = ("api_key",)
    """The settings that may hold its API key, the first one set wins."""

    def __init__(
        self,
        host: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        max_attempts: int = RETRY_ATTEMPTS,
        max_retry_s: float = RETRY_MAX_WAITING_S,
        retry_initial_s: float = RETRY_INITIAL_S,
        retry_max_s: float = RETRY_MAX_S,
        on_retry: RetryListener | None = None,
        server: ServerInfo | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_answer_bytes: int | None = None,
        max_request_s: float = math.inf,
    ) -> None:
        """``transport`` replaces the network (httpx's), for example to serve tests in
        process; ``max_answer_bytes`` replaces every answer's `answer_limit`;
        ``max_request_s``: no try of a request starts this long after its first."""
        url = host.rstrip("/")
        self.host = redact_url(url)
        """The host as messages, logs and traces show it: credentials in the URL hidden."""
        self.model = model
        self.server = server
        """Who answers at the host, when already known (the factory found out)."""
        self.timeout_s = timeout_s
        self._has_key = bool(api_key)
        self.retry_policy = RetryPolicy(
            attempts=max(1, max_attempts),
            max_waiting_s=max_retry_s,
            initial_s=retry_initial_s,
            max_s=retry_max_s,
            on_retry=on_retry,
            max_elapsed_s=max_request_s,
        )
        self.max_answer_bytes = max_answer_bytes
        self._unreadable: dict[str, int] = {}
        """Answers in a row that could not be read, by path."""
        self._gave_up: dict[str, UnreadableServer] = {}
        self._repeats = 0
        """Requests in a row that ended in a `RepeatedAnswer`."""
        self._unreadable_server: UnreadableServer | None = None
        if api_key and _has_userinfo(url):
            variables = " or ".join(key_variable(k) for k in self.key_settings)
            raise ConfigError(
                f"{self.host}: the URL holds credentials and an API key ({variables}) is set "
                "too; give one of them"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            self._transport = transport_for(url, headers, timeout_s, transport)
        except ValueError as e:
            raise ConfigError(f"invalid host {self.host!r}: {e}") from None

    def __repr__(self) -> str:
        key = "set" if self._has_key else "none"
        return f"{type(self).__name__}(host={self.host!r}, model={self.model!r}, api_key={key})"

    async def __aenter__(self) -> HttpBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()

    # ------------------------------------------------------------ what subclasses adapt

    def error_message(self, body: Any) -> str | None:
        """The message in an error body the server sent (``{"error": …}``), if any."""
        if isinstance(body, dict) and body.get("error"):
            error = body["error"]
            if isinstance(error, dict):
                return str(error.get("message") or error)
            return str(error)
        return None

    def unreachable_hint(self) -> str:
        return f"cannot reach {self.server_name} at {self.host}"

    def not_found_hint(self, model: str) -> str:
        return f"model {model} not found at {self.host}"

    # ------------------------------------------------------------ requests

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` until it succeeds or fails in a way `retry_policy` does not retry, or
        its answer cannot be read for the same reason twice in a row (`RepeatedAnswer`)."""
        if self._unreadable_server is not None:
            raise self._unreadable_server
        reasons: list[str] = []

        async def once() -> T:
            try:
                result = await attempt()
            except BackendError as e:
                if not e.unreadable:
                    raise
                reason = str(e).split("; it began: ", 1)[0]
                if reasons and reasons[-1] == reason:
                    raise self._repeated(e) from None
                reasons.append(reason)
                raise
            if isinstance(result, Completion):  # a model answer read whole (not a probe's)
                self._repeats = 0
            return result

        return await self.retry_policy.call(once)

    def _repeated(self, e: BackendError) -> BackendError:
        self._repeats += 1
        what = str(e).removeprefix(self.host + " ")
        if self._repeats < REPEATS_IN_A_ROW:
            return RepeatedAnswer(
                f"{self.host} sent the same answer tracegen cannot read twice in a row: {what}"
            )
        self._unreadable_server = UnreadableServer(
            f"{self.host} sent {self._repeats} requests in a row the same answer twice that "
            f"tracegen cannot read, the last: {what}"
        )
        return self._unreadable_server

    async def get_json(self, path: str, *, model: str | None = None) -> Json:
        return await self.retrying(lambda: self.request_json("GET", path, None, model))

    async def post_json(self, path: str, body: Json, *, model: str | None = None) -> Json:
        return await self.retrying(lambda: self.request_json("POST", path, body, model))

    def limit_for(self, request: ChatRequest | None) -> int:
        """The most bytes an answer may hold: ``max_answer_bytes`` when set, else the
        request's `answer_limit` (the floor for a request that generates nothing)."""
        if self.max_answer_bytes is not None:
            return self.max_answer_bytes
        return answer_limit(request) if request is not None else ANSWER_FLOOR_BYTES

    async def request_json(
        self,
        method: str,
        path: str,
        body: Json | None,
        model: str | None = None,
        limit: int | None = None,
    ) -> Json:
        """One attempt at a request whose answer is one JSON object of at most ``limit``
        bytes (`limit_for`), read whole (with ``X-Session-ID`` inside
        `tracegen.llm.base.session`); transport faults and error statuses become our errors,
        and a server that keeps answering what cannot be read is asked no more."""
        if path in self._gave_up:
            raise self._gave_up[path]
        try:
            data = await self._request_json(method, path, body, model, limit)
        except BackendError as e:
            if not e.unreadable:
                raise
            count = self._unreadable[path] = self._unreadable.get(path, 0) + 1
            if count >= UNREADABLE_IN_A_ROW:
                self._gave_up[path] = UnreadableServer(
                    f"{self.host} sent {count} answers in a row to {path} that tracegen cannot "
                    f"read, the last: {str(e).removeprefix(self.host + ' ')}"
                )
                raise self._gave_up[path] from None
            raise
        self._unreadable.pop(path, None)
        return data

    async def _request_json(
        self, method: str, path: str, body: Json | None, model: str | None, limit: int | None
    ) -> Json:
        content = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        episode = SESSION_ID.get()
        if episode is not None:
            headers["X-Session-ID"] = episode
        most = self.limit_for(None) if limit is None else limit
        try:
            answer = await self._transport.request(method, path, headers, content, most)
        except ResponseTooLarge as e:
            raise AnswerTooLarge(
                f"{self.host} sent {e} (TRACEGEN_MAX_ANSWER_BYTES raises the limit); "
                f"it began: {e.first!r}"
            ) from None
        except MalformedResponse as e:
            raise ProtocolError(f"{self.host} sent a {e}; it began: {e.first!r}") from None
        except httpx.RemoteProtocolError:
            # Closed before any answer: often a kept-alive connection the server had just
            # closed, so the next attempt is sent at once; it still counts as an attempt, and
            # a server that keeps failing is not hammered.
            error = ServerError(f"{self.host} closed the connection before answering")
            error.retry_after = 0.0
            raise error from None
        except httpx.TransportError as e:
            raise self.transport_error(e) from None
        except httpx.InvalidURL as e:
            raise ConfigError(f"invalid host {self.host!r}: {e}") from None
        if answer.status != 200:
            raise self.status_error(answer, model or self.model)
        return self.json_object(answer.body, "response")

    def json_object(self, raw: str | bytes | bytearray, what: str) -> Json:
        """``raw`` as a JSON object, or `ProtocolError` naming the host and ``what`` it is."""
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ProtocolError(
                f"{self.host} sent a malformed {what}, not JSON; it began: {first_bytes(raw)!r}"
            ) from None
        if not isinstance(data, dict):
            raise ProtocolError(f"{self.host} sent a {what} that is not a JSON object")
        return data

    # ------------------------------------------------------------ errors

    def transport_error(self, e: httpx.TransportError) -> BackendError:
        if isinstance(e, httpx.ConnectError | httpx.ConnectTimeout):
            return BackendUnavailable(self.unreachable_hint())
        if isinstance(e, httpx.TimeoutException):
            return BackendTimeout(f"{self.host} did not answer within {self.timeout_s:g}s")
        if isinstance(e, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            return ServerError(f"{self.host} dropped the connection mid-response")
        return BackendUnavailable(
            f"cannot talk to {self.server_name} at {self.host}: {type(e).__name__}"
        )

    def status_error(self, answer: HttpResponse, model: str) -> BackendError:
        status = answer.status
        message = self._body_message(answer.body)
        where = f"{self.host} (HTTP {status})"
        if status == 404:
            return ModelNotFound(self.not_found_hint(model))
        if status in (401, 403):
            hint = (
                f"{self.key_variable} was rejected: check it"
                if self._has_key
                else f"{self.key_variable} is missing: set it for this host"
            )
            return AuthError(f"{where} refused the request: {hint}")
        if status in (429, 503):
            error = Overloaded(f"{where} is busy: {message}")
            error.retry_after = retry_after_s(answer.header("retry-after"))
            return error
        if status >= 500:
            return ServerError(f"{where} failed: {message}")
        return BadRequest(f"{where} rejected the request: {message}")

    def _body_message(self, raw: bytes | bytearray) -> str:
        try:
            message = self.error_message(orjson.loads(raw))
        except orjson.JSONDecodeError:
            message = None
        if message:
            return clip(message, MESSAGE_CHARS)
        text = bytes(raw[:800]).decode(errors="replace").strip()
        return clip(text, 200) or "no message"


def retry_after_s(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), if readable."""
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError, IndexError):
        from datetime import UTC, datetime

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    return None


def first_bytes(raw: str | bytes | bytearray) -> bytes:
    """The first bytes of an answer, for an error message."""
    return raw[:64].encode() if isinstance(raw, str) else bytes(raw[:64])


MESSAGE_CHARS = 400
"""Characters of a server's error message kept for the error tracegen reports."""


def clip(text: str | bytes | bytearray, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for an error message."""
    if not isinstance(text, str):
        text = bytes(text[: 4 * limit]).decode(errors="replace")
    return text if len(text) <= limit else text[:limit] + "…"
