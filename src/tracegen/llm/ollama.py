"""Ollama's native API: ``/api/chat``, raw ``/api/generate``, model information.

Answers are asked for whole (``stream: false``): one body per request, parsed once, instead of
a line, a JSON parse and a record per token; the logprobs come as one array.

Follows ollama/ollama ``docs/openapi.yaml`` @ 82360f08 and ``api/types.go`` of v0.12.11+ (the first
release with ``logprobs``/``top_logprobs``), ``docs/api/errors.mdx`` @ e99f4b9a (a failure is an
``{"error"}`` body with its status) and ``server/routes.go`` (a chat request
with ``_debug_render_only`` answers ``_debug_info.rendered_template``, v0.11.5+). Transport,
retries and status codes are `tracegen.llm.server_backend`'s.
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
    token_logprobs,
)
from tracegen.llm.server_backend import MESSAGE_CHARS, HttpBackend, Json, clip
from tracegen.schema import ToolCall, ToolFunction

NS = 1e-9
_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


class OllamaBackend(HttpBackend):
    """One Ollama host and model."""

    server_name: ClassVar[str] = "Ollama"
    key_variable: ClassVar[str] = "OLLAMA_API_KEY"
    key_settings: ClassVar[tuple[str, ...]] = ("api_key", "ollama_api_key")
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
        return await self.retrying(lambda: self._answer("/api/chat", body, request))

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        if not request.messages or request.messages[-1].role != "assistant":
            raise ValueError("continue_message needs a partial assistant message last")
        method = pick_continuation(method, self.capabilities, self.server_name)
        if method == "prefill":
            completion = await self.chat(request)
        else:
            prompt = await self._render(request)
            body = self._generate_body(request, prompt)
            completion = await self.retrying(lambda: self._answer("/api/generate", body, request))
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
        body: Json = {"model": self.model, "stream": False}
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

    # ------------------------------------------------------------ the answer

    async def _answer(self, path: str, body: Json, request: ChatRequest) -> Completion:
        """One request answered whole (``stream: false``): one body to read and parse, not a
        line per token."""
        data = await self.request_json("POST", path, body, limit=self.limit_for(request))
        if "error" in data:
            said = clip(self.error_message(data) or "no message", MESSAGE_CHARS)
            raise ServerError(f"{self.host} failed: {said}")
        if not data.get("done"):
            raise ServerError(f"{self.host} sent an answer that is not done")
        chat = path == "/api/chat"
        message = (data.get("message") or {}) if chat else data
        content = message.get("content" if chat else "response") or ""
        tool_calls = [_tool_call(c) for c in message.get("tool_calls") or []]
        logprobs = token_logprobs(data.get("logprobs"), self.host) if request.logprobs else []

        def seconds(key: str) -> float:
            return _int(data, key) * NS

        finish = _FINISH.get(str(data.get("done_reason")))
        if finish == "stop" and tool_calls:
            finish = "tool_calls"
        return Completion(
            content=content,
            thinking=message.get("thinking") or "",
            tool_calls=tool_calls,
            logprobs=logprobs or None,
            finish_reason=finish,
            prompt_tokens=_int(data, "prompt_eval_count"),
            completion_tokens=_int(data, "eval_count"),
            prompt_s=seconds("prompt_eval_duration"),
            generation_s=seconds("eval_duration"),
            load_s=seconds("load_duration"),
            total_s=seconds("total_duration"),
            host=self.host,
            model=self.model,
        )


def _int(data: Json, key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
