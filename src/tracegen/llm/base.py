"""The neutral model layer: what modes ask of any backend, and what comes back.

Nothing here names a server. Each backend (one module per wire protocol, or a model run in
process) maps `SamplingOptions` to its own fields and fills a `Completion` with the same
meaning whatever the server: ``finish_reason`` is ``stop``, ``length`` or ``tool_calls``;
token counts and durations (seconds) are what the server reported, zero when it said nothing.
A backend declares what it can do in `Capabilities`; callers ask for a capability, never test
for a class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tracegen.config import ContinueChoice
from tracegen.errors import ConfigError, ImpossibleTokenId, ProtocolError
from tracegen.llm.grammar import Grammar
from tracegen.schema import (
    ChatMessage,
    ContinueMethod,
    LogprobsKind,
    TokenLogprob,
    Tokens,
    ToolCall,
    token_records,
)

# How a partial assistant message is continued (`ContinueMethod`): ``prefill`` sends it last in
# a chat request (the server must not close the turn); ``raw`` renders the chat template and
# continues the text; ``continue`` asks the server to continue it (``continue_final_message``).
# A `ContinueChoice` may also be ``auto``: the best method the backend supports.
FinishReason = Literal["stop", "length", "tool_calls"]
RetryListener = Callable[[str], None]
"""Told one line each time a request is retried (the run's progress counts them)."""

SESSION_ID: ContextVar[str | None] = ContextVar("tracegen_session_id", default=None)
"""The episode the requests made in this context belong to (see `session`)."""


@contextmanager
def session(session_id: str) -> Iterator[None]:
    """Tag every request made inside as one episode's: HTTP backends send ``session_id`` as
    the ``X-Session-ID`` header, so a router in front of model replicas (vLLM, SGLang) can
    keep the episode on the replica that has its prompt prefix cached."""
    token = SESSION_ID.set(session_id)
    try:
        yield
    finally:
        SESSION_ID.reset(token)


@dataclass(frozen=True)
class Capabilities:
    """What one backend can give; ``continuation`` lists the methods it supports, best first."""

    logprobs: bool = True
    token_ids: bool = False
    continuation: tuple[ContinueMethod, ...] = ()
    tools: bool = True
    thinking: bool = False
    grammar: bool = False
    """Whether decoding can be constrained to a `Grammar` (``SamplingOptions.grammar``)."""
    logprobs_kind: LogprobsKind = "unknown"
    """Which logprobs the backend returns unasked: ``raw`` or ``unknown`` (it does not say)."""
    processed_logprobs: bool = False
    """Whether it returns the sampler's logprobs when asked (``processed_logprobs``)."""


class SamplingOptions(BaseModel):
    """Backend-neutral sampling options; ``None`` fields are left to the server."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    max_tokens: int | None = None
    context_tokens: int | None = None
    stop: list[str] = Field(default_factory=list)
    grammar: Grammar | None = None
    """Constrain the reply to this language (a backend without the ``grammar`` capability
    never gets one)."""


class ChatRequest(BaseModel):
    """One chat request. When ``messages`` ends with an assistant message, it is continued."""

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None = None
    think: bool | Literal["low", "medium", "high"] | None = None
    options: SamplingOptions = Field(default_factory=SamplingOptions)
    logprobs: bool = True
    top_logprobs: int = Field(default=0, ge=0, le=20)
    processed_logprobs: bool = False
    """Ask for the logprobs of the distribution sampled from (after temperature and
    truncation) where the backend can give them (`Capabilities.processed_logprobs`)."""


class Completion(BaseModel):
    """One finished model answer, accumulated from every streamed chunk."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    logprobs: Tokens | None = None
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_s: float = 0.0
    generation_s: float = 0.0
    load_s: float = 0.0
    total_s: float = 0.0
    host: str = ""
    model: str = ""
    tools_in_template: bool = False
    """Whether the request's tools reached the model through the chat template tracegen
    rendered (a backend without the ``tools`` capability: the embedded model), not a
    server's ``tools`` field."""
    continuation: ContinueMethod | None = None
    logprobs_kind: LogprobsKind = "unknown"
    """Which distribution ``logprobs`` are of, as far as the backend knows."""
    prompt_ids: list[int] | None = None
    """The token ids of the whole prompt the model was given, where the backend knows them."""
    completion_ids: list[int] | None = None
    """Every token id the model sampled (a stop string's included), where the backend knows
    them; `logprobs` may hold fewer tokens (servers drop the stop string's)."""


class Backend(Protocol):
    """What a mode may ask of a model: a backend for one host, or a pool of them."""

    model: str

    async def chat(self, request: ChatRequest) -> Completion:
        """Run one request to completion (streaming underneath), with bounded retries."""
        ...

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        """Continue the partial assistant message that ends ``request.messages``; the
        completion holds only the new text and says which method it used."""
        ...


@dataclass(frozen=True)
class ServerInfo:
    """Who answers at a host: ``kind`` (``ollama``, ``vllm``, ``llamacpp``…), its ``name`` for
    people, and its ``version`` as the server says."""

    kind: str
    name: str
    version: str
    logprobs_kind: LogprobsKind | None = None
    """Which logprobs it says it returns, where it says (vLLM's ``--logprobs-mode``)."""


def pick_continuation(
    choice: ContinueChoice, capabilities: Capabilities, server: str
) -> ContinueMethod:
    """The method ``choice`` means on a backend with ``capabilities`` (``auto``: its best), or
    a `ConfigError` naming the choices that work with ``server``."""
    methods = capabilities.continuation
    for method in methods:
        if choice in ("auto", method):
            return method
    works = ", ".join(("auto", *methods)) if methods else "none, so use another --mode"
    raise ConfigError(
        f"--continuation {choice} does not work with {server} (choices that do: {works})"
    )


def no_grammar(server: str) -> ConfigError:
    """What a backend without the ``grammar`` capability raises when asked for one."""
    return ConfigError(f"{server} takes no grammar: decoding cannot be constrained (--constrain)")


class HostBackend(Backend, Protocol):
    """A backend bound to one server: the unit the pool spreads requests over."""

    host: str

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can give (known once the server said who it is)."""
        ...

    async def server_info(self) -> ServerInfo:
        """One quick request that proves the host answers (`BackendUnavailable` if not)."""
        ...

    async def model_names(self) -> list[str]:
        """The models the server offers."""
        ...

    async def model_features(self) -> set[str]:
        """What the model itself supports (``tools``, ``thinking``…); `ModelNotFound` if absent."""
        ...

    async def aclose(self) -> None: ...


def token_logprobs(entries: Any, host: str) -> list[TokenLogprob]:
    """The per-token logprob entries (``{token, logprob, bytes, top_logprobs, id}``) ``host``
    sent, as tokens converted in one call (`token_records`); fields a server adds beyond
    these are ignored, a malformed entry is a `ProtocolError`. Probabilities (llama.cpp's
    answer to ``post_sampling_probs``: ``prob`` and ``top_probs``) are read as logprobs."""
    first = entries[0] if entries and isinstance(entries, list) else None
    if isinstance(first, dict) and "prob" in first and "logprob" not in first:
        entries = [_as_logprobs(e) for e in entries]
    try:
        return token_records(entries or [])
    except ValueError as e:
        raise ProtocolError(f"{host} sent a malformed logprobs entry: {e}") from None


LOWEST_LOGPROB = -3.4028234663852886e38
"""The logprob of a probability 0: the lowest float32, as llama.cpp writes it
(``tools/server/server-task.cpp``, ``completion_token_output::logarithm``)."""


def _as_logprobs(entry: Any) -> Any:
    """A llama.cpp post-sampling entry (``prob``, ``top_probs``: ``tools/server/
    server-task.cpp`` ``probs_vector_to_json``) with logprobs in their place."""
    if not isinstance(entry, dict) or "prob" not in entry:
        return entry
    out = {k: v for k, v in entry.items() if k not in ("prob", "top_probs")}
    out["logprob"] = _log(entry["prob"])
    out["top_logprobs"] = [_as_logprobs(t) for t in entry.get("top_probs") or ()]
    return out


def _log(prob: Any) -> Any:
    if isinstance(prob, int | float) and not isinstance(prob, bool):
        return math.log(prob) if prob > 0 else LOWEST_LOGPROB
    return prob  # not a number: `token_records` says so


def logprobs_kind(capabilities: Capabilities, request: ChatRequest) -> LogprobsKind:
    """Which logprobs a backend with ``capabilities`` returns for ``request``."""
    if request.processed_logprobs and capabilities.processed_logprobs:
        return "processed"
    return capabilities.logprobs_kind


ID_BOUND = 2**31
"""Token ids are below this when the model's vocabulary size is not known: servers hold them
as 32-bit integers (llama.cpp's ``llama_token``, vLLM's token tensors)."""


def check_ids(ids: list[int], vocab: int | None, host: str, what: str = "token") -> list[int]:
    """``ids``, each a token of a vocabulary of ``vocab`` ids (`ID_BOUND` when unknown); one
    outside it is an `ImpossibleTokenId`: the answer is an error, never data."""
    bound = vocab or ID_BOUND
    if ids and (min(ids) < 0 or max(ids) >= bound):
        bad = next(i for i in ids if not 0 <= i < bound)
        size = f"the model's {vocab:,} tokens" if vocab else "any vocabulary"
        raise ImpossibleTokenId(f"{host} sent {what} id {bad}, outside {size}")
    return ids


def check_logprob_ids(tokens: list[TokenLogprob], vocab: int | None, host: str) -> None:
    """The ids of ``tokens`` checked as `check_ids` does."""
    check_ids([t.id for t in tokens if t.id is not None], vocab, host, "logprob token")
