"""OpenAI-compatible servers (vLLM, SGLang, llama.cpp's server, LM Studio): chat completions
read whole, with each server's extensions for logprobs, token ids and continuation.

``POST /v1/chat/completions`` with ``stream: false`` answers one ``chat.completion`` object:
``choices[0].message`` carries ``content``, reasoning (``reasoning`` in newer vLLM,
``reasoning_content`` elsewhere) and complete ``tool_calls`` (``arguments`` a JSON string);
``choices[0].logprobs.content`` the sampled tokens, ``choices[0].finish_reason`` why it ended,
``usage`` the counts (llama.cpp adds ``timings``). An ``{"error": …}`` object sent with status
200 is a failure. Which server answers (`tracegen.llm.openai_servers`) decides the extras:

- vLLM: ``return_token_ids`` (the prompt's ids in ``prompt_token_ids``, the choice's in its
  ``token_ids``); with ``--return-tokens-as-token-ids`` logprob tokens read ``token_id:N`` (the
  text is in ``bytes``). ``continue`` continuation sends ``continue_final_message: true,
  add_generation_prompt: false`` (vLLM and SGLang; both true is a 400).
- llama.cpp: a request without tools (and thinking not asked for) renders the prompt with
  ``/apply-template``, tokenizes it with ``/tokenize`` and generates from the ids on
  ``/completion`` with ``return_tokens`` and ``n_probs``: the exact prompt ids and every sampled
  id, the stop string's and the end of turn's included (``tokens``), the text (``content``),
  ``completion_probabilities``, ``stop_type``, ``tokens_evaluated``, ``tokens_predicted`` and
  ``timings``. A prompt whose text (``/detokenize``) goes on from an earlier request's prompt
  and completion starts with their very ids (`tracegen.llm.sequences`). This path is ``raw``
  continuation too (the rendered prompt must end with the partial message, no end-of-turn).
  ``prefill`` sends the partial assistant message last in a chat request, which llama.cpp's
  template renderer leaves open.
- A grammar (``--constrain``) goes in the fields the server reads (`Flavor.grammar`): llama.cpp's
  ``grammar`` (on ``/completion`` too), vLLM's ``structured_outputs``, SGLang's ``ebnf``.

Sources: vLLM ``vllm/entrypoints/openai/chat_completion/protocol.py`` @ d5dba2d7
(``ChatCompletionResponse.prompt_token_ids``, ``ChatCompletionResponseChoice.token_ids``);
llama.cpp's server in ``xllamacpp`` 2026.10, measured. Transport, retries and HTTP statuses
are `tracegen.llm.server_backend`'s; a body is decoded with orjson into plain dicts, and the
logprob entries are validated in one call (`tracegen.llm.base.token_logprobs`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from tracegen.config import redact_url
from tracegen.errors import (
    AuthError,
    BackendError,
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
    check_ids,
    check_logprob_ids,
    logprobs_kind,
    no_grammar,
    pick_continuation,
    token_logprobs,
)
from tracegen.llm.grammar import Grammar
from tracegen.llm.openai_servers import FLAVORS, GENERIC, Flavor
from tracegen.llm.sequences import shared
from tracegen.llm.server_backend import HttpBackend, Json, clip
from tracegen.schema import ChatMessage, LogprobsKind, TokenLogprob, ToolCall, ToolFunction

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
_NATIVE_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}
_PLACEHOLDER = "token_id:"
VLLM_LOGPROBS_MODES: dict[str, LogprobsKind] = {
    "raw_logprobs": "raw",
    "processed_logprobs": "processed",
}
"""vLLM's ``--logprobs-mode`` values that are logprobs (``raw_logits`` and
``processed_logits`` are not: ``unknown``)."""
MS = 1e-3


class OpenAIBackend(HttpBackend):
    """One OpenAI-compatible host and model. ``host`` is given with or without ``/v1``;
    ``server`` is who answers there when already known (else asked on first use)."""

    key_variable: ClassVar[str] = "OPENAI_API_KEY"
    key_settings: ClassVar[tuple[str, ...]] = ("openai_api_key", "api_key")

    def __init__(self, host: str, model: str, **kw: Any) -> None:
        # Requests go below the server's root (``/v1/…`` and llama.cpp's own ``/tokenize``…);
        # messages and traces name the host as given.
        super().__init__(host.rstrip("/").removesuffix("/v1"), model, **kw)
        self.host = redact_url(host.rstrip("/"))
        self._api = "/v1"
        self._flavor: Flavor | None = FLAVORS.get(self.server.kind) if self.server else None
        self._identified = asyncio.Lock()
        self.vocab: int | None = None
        """The model's vocabulary size, when the server said (llama.cpp's ``/v1/models``
        ``meta.n_vocab``): token ids at or past it are refused (`check_ids`)."""
        self._vocab_asked = False

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
            completion = await self._native(request, check_open=False)
        else:
            completion = await self._chat(self._chat_body(flavor, request), request)
        completion.logprobs_kind = self._logprobs_kind(flavor, request)
        return completion

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
            completion = await self._chat(body, request)
        completion.continuation = chosen
        completion.logprobs_kind = self._logprobs_kind(flavor, request)
        return completion

    async def server_info(self) -> ServerInfo:
        """Who answers: each known server's identity endpoint in turn, then ``/v1/models``."""
        for flavor in FLAVORS.values():
            for path in flavor.probes:
                data = await self._probe(path)
                if data is None:
                    continue
                version = flavor.recognise(data)
                if version is not None:
                    found = self._found(flavor, version)
                    kind = await self._logprobs_mode(flavor)
                    self.server = dataclasses.replace(found, logprobs_kind=kind)
                    return self.server
        await self.request_json("GET", f"{self._api}/models", None, None)
        return self._found(GENERIC, "")

    async def _probe(self, path: str) -> Json | None:
        """``GET path``, or None when the server answers it with an error (the path is not
        its); a host that cannot be reached, is too slow or refuses the key is an error."""
        try:
            return await self.request_json("GET", path, None, None)
        except BackendError as e:
            if not e.answered or isinstance(e, AuthError):
                raise
            return None

    def _found(self, flavor: Flavor, version: str) -> ServerInfo:
        self._flavor = flavor
        self.server = ServerInfo(kind=flavor.kind, name=flavor.name, version=version)
        return self.server

    async def model_names(self) -> list[str]:
        data = await self.get_json(f"{self._api}/models")
        models = data.get("data")
        if not isinstance(models, list):
            raise ProtocolError(f"{self.host} sent a model list without data")
        listed = [m for m in models if isinstance(m, dict)]
        for m in listed:
            meta = m.get("meta")
            size = meta.get("n_vocab") if isinstance(meta, dict) else None
            if type(size) is int and size > 0 and (m.get("id") == self.model or len(listed) == 1):
                self.vocab = size
        self._vocab_asked = True
        return [str(m.get("id", "")) for m in listed]

    async def _vocab_known(self) -> int | None:
        """`vocab`, asked of the server once (llama.cpp's says it; vLLM's does not)."""
        if not self._vocab_asked:
            self._vocab_asked = True
            await self.model_names()
        return self.vocab

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

    async def _logprobs_mode(self, flavor: Flavor) -> LogprobsKind | None:
        """Which logprobs the server says it returns: vLLM's ``--logprobs-mode`` where it
        shows it (``GET /server_info?config_format=json``, served with
        ``VLLM_SERVER_DEV_MODE=1``: ``vllm_config.model_config.logprobs_mode``, as TRL 1.16
        reads it in ``trl/generation/vllm_client.py``); None for other servers."""
        if flavor.kind != "vllm":
            return None
        data = await self._probe("/server_info?config_format=json")
        if data is None:
            return "unknown"
        config = data.get("vllm_config")
        model = config.get("model_config") if isinstance(config, dict) else None
        mode = model.get("logprobs_mode") if isinstance(model, dict) else None
        return VLLM_LOGPROBS_MODES.get(str(mode), "unknown")

    def _logprobs_kind(self, flavor: Flavor, request: ChatRequest) -> LogprobsKind:
        reported = self.server.logprobs_kind if self.server else None
        return reported or logprobs_kind(flavor.capabilities, request)

    # ------------------------------------------------------------ chat completions

    def _chat_body(self, flavor: Flavor, request: ChatRequest) -> Json:
        o = request.options
        body: Json = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            "stream": False,
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
            top = max(request.top_logprobs, flavor.least_top_logprobs)
            if top:
                body["top_logprobs"] = top
            if request.processed_logprobs and flavor.capabilities.processed_logprobs:
                body["post_sampling_probs"] = True
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

    async def _chat(self, body: Json, request: ChatRequest) -> Completion:
        async def once() -> Completion:
            data = await self._generate(f"{self._api}/chat/completions", body, request)
            return read_chat(data, request, self.host, self.model, self.vocab)

        return await self.retrying(once)

    async def _generate(self, url: str, body: Json, request: ChatRequest) -> Json:
        """The whole answer to one generation request; an ``{"error": …}`` object sent with
        status 200 is a failure (`Overloaded` when its code is 429 or 503)."""
        data = await self.request_json("POST", url, body, limit=self.limit_for(request))
        error = data.get("error")
        if error is None:
            return data
        message = self.error_message(data) or "no message"
        code = error.get("code") if isinstance(error, dict) else None
        failed = f"{self.host} answered with an error: {message}"
        raise Overloaded(failed) if str(code) in ("429", "503") else ServerError(failed)

    # ------------------------------------------------------------ llama.cpp's own endpoints

    async def _native(self, request: ChatRequest, *, check_open: bool) -> Completion:
        """Render, tokenize and generate from token ids (see the module docstring)."""
        rendered = await self.post_json(
            "/apply-template", {"messages": openai_messages(request.messages)}
        )
        prompt = rendered.get("prompt")
        if not isinstance(prompt, str):
            raise ProtocolError(f"{self.host} sent no prompt from /apply-template")
        if check_open and not prompt.endswith(request.messages[-1].content):
            raise BadRequest(
                f"{self.host} closed the assistant message instead of continuing it: "
                "start llama-server without --no-prefill-assistant"
            )
        vocab = await self._vocab_known()
        ids = await shared(self.model).going_on(
            await self._tokenize(prompt, add_special=True),
            lambda text: self._tokenize(text, add_special=False),
            self._detokenize,
        )
        o = request.options
        body: Json = {"prompt": ids, "stream": False, "return_tokens": True, "cache_prompt": True}
        sampling = {"temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k}
        sampling.update(seed=o.seed, n_predict=o.max_tokens)
        body.update({k: v for k, v in sampling.items() if v is not None})
        if o.stop:
            body["stop"] = list(o.stop)
        if request.logprobs:
            body["n_probs"] = max(1, request.top_logprobs)
            if request.processed_logprobs:
                body["post_sampling_probs"] = True
        if o.grammar is not None:
            body.update(self._grammar_fields(await self._flavor_known(), o.grammar))
        url = "/completion"

        async def once() -> Completion:
            data = await self._generate(url, body, request)
            return read_native(data, request, ids, self.host, self.model, vocab)

        completion = await self.retrying(once)
        sequence = ids + (completion.completion_ids or [])
        shared(self.model).remember(await self._detokenize(sequence), sequence)
        return completion

    async def _tokenize(self, text: str, *, add_special: bool) -> list[int]:
        tokens = await self.post_json("/tokenize", {"content": text, "add_special": add_special})
        ids = _ids(tokens.get("tokens"), self.host)
        if ids is None:
            raise ProtocolError(f"{self.host} sent no token ids from /tokenize")
        return check_ids(ids, self.vocab, self.host, "prompt token")

    async def _detokenize(self, ids: list[int]) -> str:
        content = (await self.post_json("/detokenize", {"tokens": ids})).get("content")
        if not isinstance(content, str):
            raise ProtocolError(f"{self.host} sent no text from /detokenize")
        return content


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


def read_chat(
    data: Json, request: ChatRequest, host: str, model: str, vocab: int | None = None
) -> Completion:
    """A ``chat.completion`` object as a `Completion` (its first choice); token ids outside a
    vocabulary of ``vocab`` (`check_ids`) refuse it."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProtocolError(f"{host} sent a chat completion without choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ProtocolError(f"{host} sent a chat completion without a message")
    calls = [_tool_call(c, i, host) for i, c in enumerate(message.get("tool_calls") or ())]
    finish = _FINISH.get(str(choice.get("finish_reason")))
    if finish == "stop" and calls:
        finish = "tool_calls"
    prompt_ids = _ids(data.get("prompt_token_ids"), host)
    ids = _ids(choice.get("token_ids"), host) if prompt_ids is not None else None
    if prompt_ids is not None and ids is not None:
        check_ids(prompt_ids, vocab, host, "prompt token")
        check_ids(ids, vocab, host)
    logprobs = None
    if request.logprobs:
        entries = _dict(choice.get("logprobs"), "logprobs", host).get("content")
        logprobs = _logprobs(entries, ids, request.top_logprobs, host)
        check_logprob_ids(logprobs, vocab, host)
    usage = _dict(data.get("usage"), "usage", host)
    prompt_s, generation_s = _seconds(_dict(data.get("timings"), "timings", host))
    return Completion(
        content=_text(message.get("content"), host),
        thinking=_text(message.get("reasoning") or message.get("reasoning_content"), host),
        tool_calls=calls,
        logprobs=logprobs or None,
        finish_reason=finish,
        prompt_tokens=_int(usage, "prompt_tokens"),
        completion_tokens=_int(usage, "completion_tokens"),
        prompt_s=prompt_s,
        generation_s=generation_s,
        total_s=prompt_s + generation_s,
        host=host,
        model=model,
        prompt_ids=prompt_ids if ids is not None else None,
        completion_ids=ids,
    )


def read_native(
    data: Json,
    request: ChatRequest,
    prompt_ids: list[int],
    host: str,
    model: str,
    vocab: int | None = None,
) -> Completion:
    """A llama.cpp ``/completion`` answer (``return_tokens``) as a `Completion`: the text, every
    sampled id (the stop string's and the end of turn's included) and the probabilities;
    token ids outside a vocabulary of ``vocab`` (`check_ids`) refuse it."""
    ids = _ids(data.get("tokens"), host)
    if ids is None:
        raise ProtocolError(f"{host} sent no token ids from /completion: is llama.cpp too old?")
    check_ids(ids, vocab, host)
    logprobs = None
    if request.logprobs:
        logprobs = _logprobs(data.get("completion_probabilities"), ids, request.top_logprobs, host)
        check_logprob_ids(logprobs, vocab, host)
    prompt_s, generation_s = _seconds(_dict(data.get("timings"), "timings", host))
    return Completion(
        content=_text(data.get("content"), host),
        logprobs=logprobs or None,
        finish_reason=_NATIVE_FINISH.get(str(data.get("stop_type")), "stop"),
        prompt_tokens=_int(data, "tokens_evaluated") or len(prompt_ids),
        completion_tokens=_int(data, "tokens_predicted") or len(ids),
        prompt_s=prompt_s,
        generation_s=generation_s,
        total_s=prompt_s + generation_s,
        host=host,
        model=model,
        prompt_ids=prompt_ids,
        completion_ids=ids,
    )


def _logprobs(entries: Any, ids: list[int] | None, top: int, host: str) -> list[TokenLogprob]:
    """``logprobs.content`` (or llama.cpp ``completion_probabilities``) entries as tokens, with
    at most ``top`` alternatives each. A token's id is the entry's own, else a vLLM
    ``token_id:N`` token's (the text then comes from ``bytes``), else the matching one of
    ``ids``. The entries are converted in one call, then completed; an entry whose id is not
    the one ``ids`` holds at its place (entries may stop before ``ids`` do: llama.cpp leaves out
    a stop string's) is a `ProtocolError`."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ProtocolError(f"{host} sent logprobs that are not a list")
    tokens = token_logprobs(entries, host)
    known = ids if ids is not None and len(ids) == len(tokens) else [None] * len(tokens)
    for token, token_id in zip(tokens, known, strict=True):
        if token.token.startswith(_PLACEHOLDER):
            try:
                token.id = int(token.token[len(_PLACEHOLDER) :])
            except ValueError:
                raise ProtocolError(f"{host} sent a malformed token: {clip(token.token)}") from None
            token.token = bytes(token.bytes).decode(errors="replace") if token.bytes else ""
        elif token.id is None:
            token.id = token_id
        del token.top_logprobs[top:]
    for token, sampled in zip(tokens, ids or (), strict=False):
        if token.id is not None and token.id != sampled:
            raise ProtocolError(
                f"{host} sent the logprob of token {token.id} where it sampled {sampled}"
            )
    return tokens


def _tool_call(entry: Any, index: int, host: str) -> ToolCall:
    """One complete tool call; its ``arguments`` a JSON string (or already an object)."""
    try:
        function = entry["function"]
        name, arguments = function.get("name"), function.get("arguments")
        call_id = entry.get("id")
    except (KeyError, TypeError, AttributeError):
        raise ProtocolError(f"{host} sent a malformed tool call: {clip(str(entry))}") from None
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    elif isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise ProtocolError(f"{host} sent tool call arguments that are not a JSON object")
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"{host} sent a tool call without a name")
    called = ToolFunction(name=name, arguments=arguments, index=index)
    return ToolCall(id=call_id if isinstance(call_id, str) else None, function=called)


def _ids(value: Any, host: str) -> list[int] | None:
    """Token ids as the server sent them (None when it sent none)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(type(i) is int for i in value):
        raise ProtocolError(f"{host} sent token ids that are not a list of integers")
    return value


def _text(value: Any, host: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(f"{host} sent text that is not a string: {clip(str(value))}")
    return value


def _dict(value: Any, what: str, host: str) -> Json:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{host} sent {what} that is not a JSON object")
    return value


def _seconds(timings: Json) -> tuple[float, float]:
    """llama.cpp's ``timings`` (milliseconds): seconds reading the prompt and generating."""
    return _ms(timings, "prompt_ms") * MS, _ms(timings, "predicted_ms") * MS


def _int(data: Json, key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ms(data: Json, key: str) -> float:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
