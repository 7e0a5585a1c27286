"""Ollama's native API: streamed ``/api/chat``, raw ``/api/generate``, model information.

Follows ollama/ollama ``docs/openapi.yaml`` @ 82360f08 and ``api/types.go`` of v0.12.11+ (the first
release with ``logprobs``/``top_logprobs``), ``docs/api/errors.mdx`` @ e99f4b9a (an error after
streaming began is an ``{"error"}`` line with status 200) and ``server/routes.go`` (a chat request
with ``_debug_render_only`` answers ``_debug_info.rendered_template``, v0.11.5+). Transport,
retries and status codes are `tracegen.llm.http`'s.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tracegen.errors import BadRequest, ProtocolError, ServerError
from tracegen.llm.base import (
    Capabilities,
    ChatRequest,
    Completion,
    ContinueChoice,
    FinishReason,
    ServerInfo,
    no_grammar,
    pick_continuation,
)
from tracegen.llm.http import HttpBackend, Json, clip
from tracegen.schema import TokenLogprob, ToolCall, ToolFunction, TopLogprob

NS = 1e-9
_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


class OllamaBackend(HttpBackend):
    """One Ollama host and model."""

    server_name: ClassVar[str] = "Ollama"
    key_variable: ClassVar[str] = "OLLAMA_API_KEY"
    capabilities = Capabilities(
        logprobs=True, token_ids=False, continuation=("prefill", "raw"), tools=True, thinking=True
    )

    def __init__(self, host: str, model: str, *, keep_alive: str | None = None, **kw: Any) -> None:
        super().__init__(host, model, **kw)
        self.keep_alive = keep_alive

    def unreachable_hint(self) -> str:
        return f"cannot reach Ollama at {self.host}: is `ollama serve` running?"

    def not_found_hint(self, model: str) -> str:
        return f"model {model} not found at {self.host}: run `ollama pull {model}`"

    # ------------------------------------------------------------ the backend protocol

    async def chat(self, request: ChatRequest) -> Completion:
        body = self._chat_body(request)
        return await self.retrying(lambda: self._stream("/api/chat", body, request.logprobs))

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        if not request.messages or request.messages[-1].role != "assistant":
            raise ValueError("continue_message needs a partial assistant message last")
        method = pick_continuation(method, self.capabilities, self.server_name)
        if method == "prefill":
            completion = await self.chat(request)
        else:
            prompt = await self._render(request)
            body = self._generate_body(request, prompt)
            completion = await self.retrying(
                lambda: self._stream("/api/generate", body, request.logprobs)
            )
        completion.continuation = method
        return completion

    async def server_info(self) -> ServerInfo:
        data = await self.get_json("/api/version")
        return ServerInfo(kind="ollama", name="Ollama", version=str(data.get("version", "")))

    async def model_names(self) -> list[str]:
        data = await self.get_json("/api/tags")
        return [str(m.get("name", "")) for m in data.get("models") or []]

    async def model_features(self) -> set[str]:
        """``/api/show`` ``capabilities`` (``completion``, ``tools``, ``thinking``…)."""
        data = await self.post_json("/api/show", {"model": self.model})
        return {str(c) for c in data.get("capabilities") or []}

    # ------------------------------------------------------------ request bodies

    def _base_body(self, request: ChatRequest) -> Json:
        body: Json = {"model": self.model, "stream": True}
        o = request.options
        if o.grammar is not None:
            raise no_grammar(self.server_name)
        options = {
            "temperature": o.temperature,
            "top_p": o.top_p,
            "top_k": o.top_k,
            "seed": o.seed,
            "num_predict": o.max_tokens,
            "num_ctx": o.context_tokens,
            "stop": o.stop or None,
        }
        options = {k: v for k, v in options.items() if v is not None}
        if options:
            body["options"] = options
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs:
                body["top_logprobs"] = request.top_logprobs
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    def _chat_body(self, request: ChatRequest) -> Json:
        body = self._base_body(request)
        body["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in request.messages]
        if request.tools:
            body["tools"] = request.tools
        if request.think is not None:
            body["think"] = request.think
        return body

    def _generate_body(self, request: ChatRequest, prompt: str) -> Json:
        body = self._base_body(request)
        body.update(prompt=prompt, raw=True, think=False)
        return body

    async def _render(self, request: ChatRequest) -> str:
        body = self._chat_body(request)
        for key in ("logprobs", "top_logprobs", "keep_alive"):
            body.pop(key, None)
        body.update(stream=False, _debug_render_only=True)
        data = await self.post_json("/api/chat", body)
        info = data.get("_debug_info")
        if not isinstance(info, dict) or not isinstance(info.get("rendered_template"), str):
            raise BadRequest(
                f"{self.host} did not return a rendered prompt: "
                "raw continuation needs Ollama 0.11.5 or newer"
            )
        return info["rendered_template"]

    # ------------------------------------------------------------ the stream

    async def _stream(self, path: str, body: Json, asked_logprobs: bool) -> Completion:
        acc = _Accumulator(chat=path == "/api/chat")
        async with self.open("POST", path, body) as response:
            async for line in self.lines(response):  # to its end: the connection is reused
                if acc.final is not None:
                    continue
                chunk = self.json_object(line, "NDJSON line")
                if "error" in chunk:
                    raise ServerError(f"{self.host} failed mid-response: {chunk['error']}")
                acc.add(chunk)
        if acc.final is None:
            raise ServerError(f"{self.host} ended the response before its final chunk")
        return acc.completion(self.host, self.model, asked_logprobs)


class _Accumulator:
    """Collects content, thinking, tool calls, logprobs and the final counters of a stream."""

    def __init__(self, *, chat: bool) -> None:
        self.chat = chat
        self.content: list[str] = []
        self.thinking: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.logprobs: list[TokenLogprob] = []
        self.final: Json | None = None

    def add(self, chunk: Json) -> None:
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

        def seconds(key: str) -> float:
            return _int(final, key) * NS

        finish = _FINISH.get(str(final.get("done_reason")))
        if finish == "stop" and self.tool_calls:
            finish = "tool_calls"
        return Completion(
            content="".join(self.content),
            thinking="".join(self.thinking),
            tool_calls=self.tool_calls,
            logprobs=self.logprobs if asked_logprobs and self.logprobs else None,
            finish_reason=finish,
            prompt_tokens=_int(final, "prompt_eval_count"),
            completion_tokens=_int(final, "eval_count"),
            prompt_s=seconds("prompt_eval_duration"),
            generation_s=seconds("eval_duration"),
            load_s=seconds("load_duration"),
            total_s=seconds("total_duration"),
            host=host,
            model=model,
        )


def _int(data: Json, key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
        raise ProtocolError(f"malformed logprobs entry: {clip(str(entry))}") from None


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
        raise ProtocolError(f"malformed tool call: {clip(str(entry))}") from None
