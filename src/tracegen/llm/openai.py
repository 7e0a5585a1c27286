"""OpenAI-compatible servers (vLLM, SGLang, llama.cpp's server, LM Studio): streamed chat
completions over SSE, with each server's extensions for logprobs, token ids and continuation.

``POST /v1/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``; each
``data:`` line is a chunk whose ``choices[0].delta`` carries ``content``, reasoning (``reasoning``
in newer vLLM, ``reasoning_content`` elsewhere) and ``tool_calls`` fragments keyed by ``index``
(id and name once, ``arguments`` in pieces); ``choices[0].logprobs.content`` the sampled tokens;
``finish_reason`` ends the choice, a last chunk carries ``usage`` and ``data: [DONE]`` ends the
stream. An ``{"error": …}`` chunk after the 200 is a failure mid-response. Which server answers
(`tracegen.llm.openai_servers`) decides the extras:

- vLLM: ``return_token_ids`` (the prompt's ids in the first chunk, each choice's ``token_ids``);
  with ``--return-tokens-as-token-ids`` logprob tokens read ``token_id:N`` (the text is in
  ``bytes``). ``continue`` continuation sends ``continue_final_message: true,
  add_generation_prompt: false`` (vLLM and SGLang; both true is a 400).
- llama.cpp: a request without tools (and thinking not asked for) renders the prompt with
  ``/apply-template``, tokenizes it with ``/tokenize`` and generates from the ids on
  ``/completion`` with ``return_tokens`` and ``n_probs``: the exact prompt ids and every sampled
  id, the stop string's included. That is ``raw`` continuation too (the rendered prompt must
  end with the partial message, no end-of-turn). ``prefill`` sends the partial assistant
  message last in a chat request, which llama.cpp's template renderer leaves open.
- A grammar (``--constrain``) goes in the fields the server reads (`Flavor.grammar`): llama.cpp's
  ``grammar`` (on ``/completion`` too), vLLM's ``structured_outputs``, SGLang's ``ebnf``.

Transport, retries and HTTP statuses are `tracegen.llm.http`'s; lines are decoded with orjson
into plain dicts, and only the recorded tokens become `TokenLogprob` models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from tracegen.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    ModelNotFound,
    Overloaded,
    ProtocolError,
    ServerError,
)
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
from tracegen.llm.grammar import Grammar
from tracegen.llm.http import HttpBackend, Json, clip
from tracegen.llm.openai_servers import FLAVORS, GENERIC, Flavor
from tracegen.schema import ChatMessage, TokenLogprob, ToolCall, ToolFunction, TopLogprob

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
_NATIVE_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}
_PLACEHOLDER = "token_id:"
MS = 1e-3


class OpenAIBackend(HttpBackend):
    """One OpenAI-compatible host and model. ``host`` is given with or without ``/v1``;
    ``server`` is who answers there when already known (else asked on first use)."""

    key_variable: ClassVar[str] = "OPENAI_API_KEY"

    def __init__(self, host: str, model: str, **kw: Any) -> None:
        super().__init__(host, model, **kw)
        self._root = self.host.removesuffix("/v1")
        self._api = f"{self._root}/v1"
        self._flavor: Flavor | None = FLAVORS.get(self.server.kind) if self.server else None
        self._identified = asyncio.Lock()

    @property
    def server_name(self) -> str:  # type: ignore[override]
        return (self._flavor or GENERIC).name

    @property
    def capabilities(self) -> Capabilities:
        return (self._flavor or GENERIC).capabilities

    def unreachable_hint(self) -> str:
        return f"cannot reach an OpenAI-compatible server at {self.host}: is it running?"

    def not_found_hint(self, model: str) -> str:
        return (
            f"model {model} is not served at {self.host}: "
            "`tracegen doctor` lists the models it serves"
        )

    def error_message(self, body: Any) -> str | None:
        """``{"error": {"message"}}``, ``{"error": "…"}``, older vLLM's flat ``{"message"}``
        or FastAPI's ``{"detail"}``."""
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict):
                inner = error.get("error")
                if isinstance(inner, dict):
                    error = inner
                return str(error.get("message") or error)
            for key in ("message", "detail"):
                if body.get(key):
                    return str(body[key])
        return super().error_message(body)

    # ------------------------------------------------------------ the backend protocol

    async def chat(self, request: ChatRequest) -> Completion:
        flavor = await self._flavor_known()
        if flavor.token_ids == "llamacpp" and not request.tools and request.think is not True:
            return await self._native(request, check_open=False)
        body = self._chat_body(flavor, request)
        return await self.retrying(lambda: self._stream_chat(body, request))

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        if not request.messages or request.messages[-1].role != "assistant":
            raise ValueError("continue_message needs a partial assistant message last")
        flavor = await self._flavor_known()
        chosen = pick_continuation(method, flavor.capabilities, flavor.name)
        if chosen == "raw":
            completion = await self._native(request, check_open=True)
        else:
            body = self._chat_body(flavor, request)
            if chosen == "continue":
                body.update(continue_final_message=True, add_generation_prompt=False)
            completion = await self.retrying(lambda: self._stream_chat(body, request))
        completion.continuation = chosen
        return completion

    async def server_info(self) -> ServerInfo:
        """Who answers: each known server's identity endpoint in turn, then ``/v1/models``."""
        for flavor in FLAVORS.values():
            for path in flavor.probes:
                try:
                    data = await self._json("GET", self._root + path, None, None)
                except (BackendUnavailable, BackendTimeout, AuthError):
                    raise
                except BackendError:
                    continue
                version = flavor.recognise(data)
                if version is not None:
                    return self._found(flavor, version)
        await self._json("GET", f"{self._api}/models", None, None)
        return self._found(GENERIC, "")

    def _found(self, flavor: Flavor, version: str) -> ServerInfo:
        self._flavor = flavor
        self.server = ServerInfo(kind=flavor.kind, name=flavor.name, version=version)
        return self.server

    async def model_names(self) -> list[str]:
        data = await self.get_json(f"{self._api}/models")
        models = data.get("data")
        if not isinstance(models, list):
            raise ProtocolError(f"{self.host} sent a model list without data")
        return [str(m.get("id", "")) for m in models if isinstance(m, dict)]

    async def model_features(self) -> set[str]:
        """The model must be listed; its features are what the server can give."""
        if self.model not in await self.model_names():
            raise ModelNotFound(self.not_found_hint(self.model))
        caps = (await self._flavor_known()).capabilities
        return {"completion"} | {n for n in ("tools", "thinking") if getattr(caps, n)}

    async def _flavor_known(self) -> Flavor:
        async with self._identified:
            if self._flavor is None:
                await self.server_info()
        return self._flavor or GENERIC

    # ------------------------------------------------------------ chat completions

    def _chat_body(self, flavor: Flavor, request: ChatRequest) -> Json:
        o = request.options
        body: Json = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        sampling = {"temperature": o.temperature, "top_p": o.top_p, "seed": o.seed}
        sampling["max_tokens"] = o.max_tokens
        if flavor.extensions:
            sampling["top_k"] = o.top_k
        body.update({k: v for k, v in sampling.items() if v is not None})
        if o.stop:
            body["stop"] = list(o.stop)
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs:
                body["top_logprobs"] = request.top_logprobs
        if request.tools:
            body["tools"] = request.tools
        if isinstance(request.think, str):
            body["reasoning_effort"] = request.think
        elif request.think is not None and flavor.extensions:
            body["chat_template_kwargs"] = {"enable_thinking": request.think}
        if flavor.token_ids == "vllm":
            body["return_token_ids"] = True
        if o.grammar is not None:
            body.update(self._grammar_fields(flavor, o.grammar))
        return body

    def _grammar_fields(self, flavor: Flavor, grammar: Grammar) -> Json:
        """The fields that constrain decoding to ``grammar`` on this server."""
        if flavor.grammar is None:
            raise no_grammar(f"{flavor.name} at {self.host}")
        return flavor.grammar(grammar, self.server.version if self.server else "")

    async def _stream_chat(self, body: Json, request: ChatRequest) -> Completion:
        acc = _ChatStream()
        async with self.open("POST", f"{self._api}/chat/completions", body) as response:
            async for line in self.lines(response):  # to its end: the connection is reused
                data = sse_data(line)
                if data is None or acc.done:
                    continue
                if data == b"[DONE]":
                    acc.done = True
                    continue
                chunk = self.json_object(data, "SSE event")
                if "error" in chunk:
                    raise self._mid_stream(chunk)
                acc.add(chunk, self.host)
        if not acc.done:
            raise ServerError(f"{self.host} ended the response before data: [DONE]")
        return acc.completion(self.host, self.model, request, self.host)

    def _mid_stream(self, chunk: Json) -> BackendError:
        message = self.error_message(chunk) or "no message"
        error = chunk.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        where = f"{self.host} failed mid-response: {message}"
        return Overloaded(where) if str(code) in ("429", "503") else ServerError(where)

    # ------------------------------------------------------------ llama.cpp's own endpoints

    async def _native(self, request: ChatRequest, *, check_open: bool) -> Completion:
        """Render, tokenize and generate from token ids (see the module docstring)."""
        rendered = await self.post_json(
            f"{self._root}/apply-template", {"messages": openai_messages(request.messages)}
        )
        prompt = rendered.get("prompt")
        if not isinstance(prompt, str):
            raise ProtocolError(f"{self.host} sent no prompt from /apply-template")
        if check_open and not prompt.endswith(request.messages[-1].content):
            raise BadRequest(
                f"{self.host} closed the assistant message instead of continuing it: "
                "start llama-server without --no-prefill-assistant"
            )
        tokens = await self.post_json(
            f"{self._root}/tokenize", {"content": prompt, "add_special": True}
        )
        ids = tokens.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ProtocolError(f"{self.host} sent no token ids from /tokenize")
        o = request.options
        body: Json = {"prompt": ids, "stream": True, "return_tokens": True, "cache_prompt": True}
        sampling = {"temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k}
        sampling.update(seed=o.seed, n_predict=o.max_tokens)
        body.update({k: v for k, v in sampling.items() if v is not None})
        if o.stop:
            body["stop"] = list(o.stop)
        if request.logprobs:
            body["n_probs"] = max(1, request.top_logprobs)
        if o.grammar is not None:
            body.update(self._grammar_fields(await self._flavor_known(), o.grammar))
        return await self.retrying(lambda: self._stream_native(body, ids, request))

    async def _stream_native(self, body: Json, ids: list[int], request: ChatRequest) -> Completion:
        acc = _NativeStream()
        async with self.open("POST", f"{self._root}/completion", body) as response:
            async for line in self.lines(response):
                data = sse_data(line)
                if data is None or acc.final is not None:
                    continue
                chunk = self.json_object(data, "SSE event")
                if "error" in chunk:
                    raise self._mid_stream(chunk)
                acc.add(chunk, request.top_logprobs, self.host)
        if acc.final is None:
            raise ServerError(f"{self.host} ended the response before its last chunk")
        return acc.completion(self.host, self.model, request, ids)


def sse_data(line: bytes) -> bytes | None:
    """The payload of an SSE ``data:`` line; None for comments and other fields."""
    if not line.startswith(b"data:"):
        return None
    return line[5:].strip()


def openai_messages(messages: Sequence[ChatMessage]) -> list[Json]:
    """Messages in the OpenAI shape: tool calls with ids and JSON-string arguments, and each
    tool message answering the call it follows (``tool_call_id``)."""
    out: list[Json] = []
    pending: list[str] = []
    for n, m in enumerate(messages):
        entry: Json = {"role": m.role, "content": m.content}
        if m.tool_calls:
            pending = [c.id or f"call_{n}_{i}" for i, c in enumerate(m.tool_calls)]
            entry["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": c.function.name,
                        "arguments": orjson.dumps(c.function.arguments).decode(),
                    },
                }
                for call_id, c in zip(pending, m.tool_calls, strict=True)
            ]
        elif m.role == "tool" and pending:
            entry["tool_call_id"] = pending.pop(0)
        out.append(entry)
    return out


def token_logprob(entry: Any, token_id: int | None = None, top: int | None = None) -> TokenLogprob:
    """One ``logprobs.content`` (or llama.cpp ``completion_probabilities``) entry, with at most
    ``top`` alternatives; its id is the entry's own, else a vLLM ``token_id:N`` token's (the
    text then comes from ``bytes``), else ``token_id``."""
    try:
        token, raw = entry["token"], entry.get("bytes")
        token_id = entry.get("id", token_id)
        if token.startswith(_PLACEHOLDER):
            token_id = int(token[len(_PLACEHOLDER) :])
            token = bytes(raw).decode(errors="replace") if raw else ""
        return TokenLogprob(
            token=token,
            logprob=entry["logprob"],
            bytes=raw,
            id=token_id,
            top_logprobs=[
                TopLogprob(token=t["token"], logprob=t["logprob"], bytes=t.get("bytes"))
                for t in (entry.get("top_logprobs") or ())[:top]
            ],
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ProtocolError(f"malformed logprobs entry: {clip(str(entry))}") from None


@dataclass
class _Call:
    """A tool call as its fragments arrive: id and name once, the arguments in pieces."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def tool_call(self, index: int, host: str) -> ToolCall:
        text = "".join(self.arguments).strip()
        try:
            arguments = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            raise ProtocolError(f"{host} sent tool call arguments that are not a JSON object")
        if not self.name:
            raise ProtocolError(f"{host} sent a tool call without a name")
        function = ToolFunction(name=self.name, arguments=arguments, index=index)
        return ToolCall(id=self.id, function=function)


class _ChatStream:
    """Collects one chat completion from its SSE chunks (choice 0)."""

    def __init__(self) -> None:
        self.done = False
        self.content: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.logprobs: list[TokenLogprob] = []
        self.prompt_ids: list[int] | None = None
        self.completion_ids: list[int] | None = None
        self.finish: str | None = None
        self.usage: Json = {}
        self.timings: Json = {}

    def add(self, chunk: Json, host: str) -> None:
        try:
            if chunk.get("prompt_token_ids") is not None:
                self.prompt_ids = list(chunk["prompt_token_ids"])
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) == 0:
                    self._choice(choice)
            self.usage = chunk.get("usage") or self.usage
            self.timings = chunk.get("timings") or self.timings
        except (TypeError, AttributeError, KeyError, ValueError):
            raise ProtocolError(f"{host} sent a malformed chunk: {clip(str(chunk))}") from None

    def _choice(self, choice: Json) -> None:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            self.content.append(delta["content"])
        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
        if reasoning:
            self.thinking.append(reasoning)
        for fragment in delta.get("tool_calls") or ():
            call = self.calls.setdefault(int(fragment.get("index", 0)), _Call())
            function = fragment.get("function") or {}
            call.id = fragment.get("id") or call.id
            call.name = function.get("name") or call.name
            call.arguments.append(function.get("arguments") or "")
        entries = (choice.get("logprobs") or {}).get("content") or ()
        ids = choice.get("token_ids")
        if ids is not None:
            self.completion_ids = (self.completion_ids or []) + list(ids)
        if ids is None or len(ids) != len(entries):
            ids = [None] * len(entries)
        self.logprobs.extend(token_logprob(e, i) for e, i in zip(entries, ids, strict=True))
        self.finish = choice.get("finish_reason") or self.finish

    def completion(self, host: str, model: str, request: ChatRequest, shown: str) -> Completion:
        calls = [self.calls[i].tool_call(i, shown) for i in sorted(self.calls)]
        finish = _FINISH.get(self.finish or "")
        if finish == "stop" and calls:
            finish = "tool_calls"
        ids = self.completion_ids if self.prompt_ids is not None else None
        tokens = self.logprobs
        prompt_ms, predicted_ms = _ms(self.timings, "prompt_ms"), _ms(self.timings, "predicted_ms")
        return Completion(
            content="".join(self.content),
            thinking="".join(self.thinking),
            tool_calls=calls,
            logprobs=tokens if request.logprobs and tokens else None,
            finish_reason=finish,
            prompt_tokens=_int(self.usage, "prompt_tokens"),
            completion_tokens=_int(self.usage, "completion_tokens"),
            prompt_s=prompt_ms * MS,
            generation_s=predicted_ms * MS,
            total_s=(prompt_ms + predicted_ms) * MS,
            host=host,
            model=model,
            prompt_ids=self.prompt_ids if ids is not None else None,
            completion_ids=ids,
        )


class _NativeStream:
    """Collects one llama.cpp ``/completion`` stream: text, every sampled id, probabilities."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []
        self.final: Json | None = None

    def add(self, chunk: Json, top: int, host: str) -> None:
        try:
            self.content.append(chunk.get("content") or "")
            self.ids.extend(int(i) for i in chunk.get("tokens") or ())
            self.logprobs.extend(
                token_logprob(e, top=top) for e in chunk.get("completion_probabilities") or ()
            )
        except (TypeError, ValueError, AttributeError):
            raise ProtocolError(f"{host} sent a malformed chunk: {clip(str(chunk))}") from None
        if chunk.get("stop") is True:
            self.final = chunk

    def completion(
        self, host: str, model: str, request: ChatRequest, prompt_ids: list[int]
    ) -> Completion:
        final = self.final or {}
        timings = final.get("timings") or {}
        prompt_ms, predicted_ms = _ms(timings, "prompt_ms"), _ms(timings, "predicted_ms")
        tokens = self.logprobs
        return Completion(
            content="".join(self.content),
            logprobs=tokens if request.logprobs and tokens else None,
            finish_reason=_NATIVE_FINISH.get(str(final.get("stop_type")), "stop"),
            prompt_tokens=_int(final, "tokens_evaluated") or len(prompt_ids),
            completion_tokens=_int(final, "tokens_predicted") or len(self.ids),
            prompt_s=prompt_ms * MS,
            generation_s=predicted_ms * MS,
            total_s=(prompt_ms + predicted_ms) * MS,
            host=host,
            model=model,
            prompt_ids=prompt_ids,
            completion_ids=self.ids,
        )


def _int(data: Json, key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ms(data: Json, key: str) -> float:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
