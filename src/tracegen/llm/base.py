"""The backend protocol modes talk to. Implementations: `tracegen.llm.ollama`."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tracegen.schema import ChatMessage, TokenLogprob, ToolCall

ContinueMethod = Literal["prefill", "raw"]


class ChatOptions(BaseModel):
    """Sampling options sent as Ollama ``options``; ``None`` fields are not sent."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    num_predict: int | None = None
    num_ctx: int | None = None
    stop: list[str] = Field(default_factory=list)


class ChatRequest(BaseModel):
    """One chat request. When ``messages`` ends with an assistant message, it is continued."""

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None = None
    think: bool | Literal["low", "medium", "high"] | None = None
    options: ChatOptions = Field(default_factory=ChatOptions)
    logprobs: bool = True
    top_logprobs: int = Field(default=0, ge=0, le=20)


class Completion(BaseModel):
    """One finished model answer, accumulated from every streamed chunk."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    done_reason: str | None = None
    prompt_eval_count: int = 0
    eval_count: int = 0
    total_duration_ns: int = 0
    load_duration_ns: int = 0
    prompt_eval_duration_ns: int = 0
    eval_duration_ns: int = 0
    host: str = ""
    model: str = ""
    continuation: ContinueMethod | None = None


class Backend(Protocol):
    """What a mode may ask of a model server."""

    model: str

    async def chat(self, request: ChatRequest) -> Completion:
        """Run one request to completion (streaming underneath), with bounded retries."""
        ...

    async def continue_message(self, request: ChatRequest, method: ContinueMethod) -> Completion:
        """Continue the partial assistant message that ends ``request.messages``.

        ``prefill`` sends it as the last message of ``/api/chat``; ``raw`` renders the chat
        template and continues with ``/api/generate`` in raw mode. The completion holds only
        the new text.
        """
        ...
