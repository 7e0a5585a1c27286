"""Ollama's native API over httpx: streamed ``/api/chat``, raw ``/api/generate``, typed errors.

Follows ollama/ollama ``docs/openapi.yaml`` @ 82360f08 and ``api/types.go`` of v0.12.11+ (the first
release with ``logprobs``/``top_logprobs``), ``docs/api/errors.mdx`` @ e99f4b9a (an error after
streaming began is an ``{"error"}`` line with status 200) and ``server/routes.go`` (a chat request
with ``_debug_render_only`` answers ``_debug_info.rendered_template``, v0.11.5+).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import httpx
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from tracegen.config import redact_url
from tracegen.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    ConfigError,
    ModelNotFound,
    Overloaded,
    ProtocolError,
    ServerError,
)
from tracegen.llm.base import ChatRequest, Completion, ContinueMethod
from tracegen.schema import TokenLogprob, ToolCall, ToolFunction, TopLogprob

log = logging.getLogger(__name__)
T = TypeVar("T")

PROBE_TIMEOUT_S = 10.0
"""How long a host may take to answer ``/api/version`` before it counts as down."""

_METRICS = {
    "prompt_eval_count": "prompt_eval_count",
    "eval_count": "eval_count",
    "total_duration": "total_duration_ns",
    "load_duration": "load_duration_ns",
    "prompt_eval_duration": "prompt_eval_duration_ns",
    "eval_duration": "eval_duration_ns",
}


class OllamaBackend:
    """One Ollama host and model; one pooled `httpx.AsyncClient`; bounded retries on faults.

    Retries restart a request from scratch (a partial stream is discarded), waiting a random
    time up to ``retry_initial_s · 2^n`` (capped at ``retry_max_s``): at most ``max_attempts``
    attempts and ``max_retry_s`` seconds of waiting between them, so a long generation that
    fails late is still retried.
    """

    def __init__(
        self,
        host: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 5,
        max_retry_s: float = 120.0,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 30.0,
        keep_alive: str | None = None,
        max_connections: int = 32,
    ) -> None:
        self.host = redact_url(host.rstrip("/"))
        self.model = model
        self.timeout_s = timeout_s
        self.keep_alive = keep_alive
        self._has_key = bool(api_key)
        self._attempts = max(1, max_attempts)
        self._max_retry_s = max_retry_s
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=host.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    def __repr__(self) -> str:
        key = "set" if self._has_key else "none"
        return f"OllamaBackend(host={self.host!r}, model={self.model!r}, api_key={key})"

    async def __aenter__(self) -> OllamaBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    # ------------------------------------------------------------ public API

    async def chat(self, request: ChatRequest) -> Completion:
        body = self._chat_body(request)
        return await self._retrying(partial(self._stream, "/api/chat", body, request.logprobs))

    async def continue_message(self, request: ChatRequest, method: ContinueMethod) -> Completion:
        if not request.messages or request.messages[-1].role != "assistant":
            raise ValueError("continue_message needs a partial assistant message last")
        if method == "prefill":
            completion = await self.chat(request)
        else:
            prompt = await self._render(request)
            body = self._generate_body(request, prompt)
            completion = await self._retrying(
                partial(self._stream, "/api/generate", body, request.logprobs)
            )
        completion.continuation = method
        return completion

    async def version(self) -> str:
        data = await self._retrying(partial(self._json, "GET", "/api/version"))
        return str(data.get("version", ""))

    async def tags(self) -> list[str]:
        data = await self._retrying(partial(self._json, "GET", "/api/tags"))
        return [str(m.get("name", "")) for m in data.get("models") or []]

    async def show(self, model: str) -> dict[str, Any]:
        """``/api/show``: ``capabilities`` (``tools``, ``thinking``…), ``parameters``…"""
        return await self._retrying(
            partial(self._json, "POST", "/api/show", {"model": model}, model=model)
        )

    # ------------------------------------------------------------ request bodies

    def _base_body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "stream": True}
        options = request.options.model_dump(exclude_none=True)
        if not options.get("stop"):
            options.pop("stop", None)
        if options:
            body["options"] = options
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs:
                body["top_logprobs"] = request.top_logprobs
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    def _chat_body(self, request: ChatRequest) -> dict[str, Any]:
        body = self._base_body(request)
        body["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in request.messages]
        if request.tools:
            body["tools"] = request.tools
        if request.think is not None:
            body["think"] = request.think
        return body

    def _generate_body(self, request: ChatRequest, prompt: str) -> dict[str, Any]:
        body = self._base_body(request)
        body.update(prompt=prompt, raw=True, think=False)
        return body

    async def _render(self, request: ChatRequest) -> str:
        body = self._chat_body(request)
        for key in ("logprobs", "top_logprobs", "keep_alive"):
            body.pop(key, None)
        body.update(stream=False, _debug_render_only=True)
        data = await self._retrying(partial(self._json, "POST", "/api/chat", body))
        info = data.get("_debug_info")
        if not isinstance(info, dict) or not isinstance(info.get("rendered_template"), str):
            raise BadRequest(
                f"{self.host} did not return a rendered prompt: "
                "raw continuation needs Ollama 0.11.5 or newer"
            )
        return info["rendered_template"]

    # ------------------------------------------------------------ transport

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts) | self._out_of_retry_time,
            wait=wait_random_exponential(multiplier=self._retry_initial_s, max=self._retry_max_s),
            retry=retry_if_exception(lambda e: isinstance(e, BackendError) and e.retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )
        return await retrying(attempt)

    def _out_of_retry_time(self, state: RetryCallState) -> bool:
        return state.idle_for >= self._max_retry_s

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s (attempt %d of %d); retrying in %.1fs",
            error,
            state.attempt_number,
            self._attempts,
            wait,
        )

    async def _json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        async with _Request(self, method, path, body, model or self.model) as response:
            try:
                raw = await response.aread()
            except httpx.TransportError as e:
                raise self._transport_error(e) from None
        return _json_object(raw, f"{self.host}{path}", "response")

    async def _stream(self, path: str, body: dict[str, Any], asked_logprobs: bool) -> Completion:
        acc = _Accumulator(chat=path == "/api/chat")
        async with _Request(self, "POST", path, body, self.model) as response:
            try:
                async for line in _lines(response):
                    chunk = self._parse_line(line)
                    if "error" in chunk:
                        raise ServerError(f"{self.host} failed mid-response: {chunk['error']}")
                    acc.add(chunk)
                    if chunk.get("done"):
                        break
            except httpx.TransportError as e:
                raise self._transport_error(e) from None
        if acc.final is None:
            raise ServerError(f"{self.host} ended the response before its final chunk")
        return acc.completion(self.host, self.model, asked_logprobs)

    def _parse_line(self, line: str) -> dict[str, Any]:
        return _json_object(line, self.host, "NDJSON line")

    def _transport_error(self, e: httpx.TransportError) -> BackendError:
        if isinstance(e, httpx.ConnectError | httpx.ConnectTimeout):
            return BackendUnavailable(
                f"cannot reach Ollama at {self.host}: is `ollama serve` running?"
            )
        if isinstance(e, httpx.TimeoutException):
            return BackendTimeout(f"{self.host} did not answer within {self.timeout_s:g}s")
        if isinstance(e, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            return ServerError(f"{self.host} dropped the connection mid-response")
        return BackendUnavailable(f"cannot talk to Ollama at {self.host}: {type(e).__name__}")

    def _status_error(self, status: int, message: str, model: str) -> BackendError:
        where = f"{self.host} (HTTP {status})"
        if status == 404:
            return ModelNotFound(
                f"model {model} not found at {self.host}: run `ollama pull {model}`"
            )
        if status in (401, 403):
            hint = (
                "OLLAMA_API_KEY was rejected: check it"
                if self._has_key
                else "OLLAMA_API_KEY is missing: set it for this host"
            )
            return AuthError(f"{where} refused the request: {hint}")
        if status in (429, 503):
            return Overloaded(f"{where} is busy: {message}")
        if status >= 500:
            return ServerError(f"{where} failed: {message}")
        return BadRequest(f"{where} rejected the request: {message}")


class _Request:
    """``async with``: send one request; transport faults and error statuses become our errors."""

    def __init__(
        self,
        backend: OllamaBackend,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        model: str,
    ) -> None:
        self._backend = backend
        self._model = model
        content = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else None
        self._stream = backend._client.stream(method, path, content=content, headers=headers)

    async def __aenter__(self) -> httpx.Response:
        backend = self._backend
        try:
            response = await self._stream.__aenter__()
        except httpx.TransportError as e:
            raise backend._transport_error(e) from None
        except httpx.InvalidURL as e:
            raise ConfigError(f"invalid Ollama host {backend.host!r}: {e}") from None
        if response.status_code != 200:
            try:
                raw = await response.aread()
            except httpx.TransportError as e:
                await self._stream.__aexit__(None, None, None)
                raise backend._transport_error(e) from None
            await self._stream.__aexit__(None, None, None)
            raise backend._status_error(response.status_code, _error_message(raw), self._model)
        return response

    async def __aexit__(self, *exc: Any) -> None:
        await self._stream.__aexit__(*exc)


class _Accumulator:
    """Collects content, thinking, tool calls, logprobs and the final counters of a stream."""

    def __init__(self, *, chat: bool) -> None:
        self.chat = chat
        self.content: list[str] = []
        self.thinking: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.logprobs: list[TokenLogprob] = []
        self.final: dict[str, Any] | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if self.chat:
            message = chunk.get("message") or {}
            self.content.append(message.get("content") or "")
            self.thinking.append(message.get("thinking") or "")
            self.tool_calls.extend(_tool_call(c) for c in message.get("tool_calls") or [])
        else:
            self.content.append(chunk.get("response") or "")
            self.thinking.append(chunk.get("thinking") or "")
        self.logprobs.extend(_token_logprob(t) for t in chunk.get("logprobs") or [])
        if chunk.get("done"):
            self.final = chunk

    def completion(self, host: str, model: str, asked_logprobs: bool) -> Completion:
        final = self.final or {}
        metrics = {ours: int(final.get(theirs) or 0) for theirs, ours in _METRICS.items()}
        return Completion(
            content="".join(self.content),
            thinking="".join(self.thinking),
            tool_calls=self.tool_calls,
            logprobs=self.logprobs if asked_logprobs and self.logprobs else None,
            done_reason=final.get("done_reason"),
            host=host,
            model=model,
            **metrics,
        )


async def _lines(response: httpx.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.strip():
            yield line


def _clip(text: str | bytes, limit: int = 80) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text if len(text) <= limit else text[:limit] + "…"


def _json_object(raw: str | bytes, source: str, what: str) -> dict[str, Any]:
    """``raw`` as a JSON object, or `ProtocolError` naming its ``source`` and ``what`` it is."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ProtocolError(f"{source} sent a malformed {what}: {_clip(raw)!r}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{source} sent a {what} that is not a JSON object")
    return data


def _error_message(raw: bytes) -> str:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _clip(raw.decode(errors="replace").strip(), 200) or "no message"
    if isinstance(data, dict) and data.get("error"):
        return str(data["error"])
    return _clip(raw.decode(errors="replace"), 200)


def _token_logprob(entry: Any) -> TokenLogprob:
    try:
        return TokenLogprob(
            token=entry["token"],
            logprob=entry["logprob"],
            bytes=entry.get("bytes"),
            top_logprobs=[
                TopLogprob(token=t["token"], logprob=t["logprob"], bytes=t.get("bytes"))
                for t in entry.get("top_logprobs") or []
            ],
        )
    except (KeyError, TypeError, ValueError):
        raise ProtocolError(f"malformed logprobs entry: {_clip(str(entry))}") from None


def _tool_call(entry: Any) -> ToolCall:
    try:
        function = entry["function"]
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            arguments = orjson.loads(arguments)
        return ToolCall(
            id=entry.get("id"),
            function=ToolFunction(
                name=function["name"], arguments=arguments, index=function.get("index")
            ),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ProtocolError(f"malformed tool call: {_clip(str(entry))}") from None
