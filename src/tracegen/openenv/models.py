"""The action, observation and state of tracegen's OpenEnv environment, on OpenEnv's own
`Action`, `Observation` and `State` (``openenv.core.env_server.types``)."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from tracegen.generate.handoff import Reply


class TracegenAction(Action):
    """The policy's turn: what it wrote (text or tool calls), with its exact token ids and
    logprobs where the sampler gave them (they go into the trace as sampled)."""

    content: str = Reply.model_fields["content"]  # type: ignore[assignment]
    thinking: str = Reply.model_fields["thinking"]  # type: ignore[assignment]
    tool_calls: list[dict[str, Any]] = Reply.model_fields["tool_calls"]  # type: ignore[assignment]
    finish_reason: str | None = Field(
        default=None, description="stop, length or tool_calls, as the server said."
    )
    prompt_ids: list[int] | None = Reply.model_fields["prompt_ids"]  # type: ignore[assignment]
    completion_ids: list[int] | None = Reply.model_fields["completion_ids"]  # type: ignore[assignment]
    logprobs: list[dict[str, Any]] | None = Reply.model_fields["logprobs"]  # type: ignore[assignment]

    def reply(self) -> Reply:
        return Reply.model_validate(self.model_dump(exclude={"metadata"}))


class TracegenObservation(Observation):
    """What the policy answers next: the whole conversation so far (OpenAI's chat shape,
    tool results and execution feedback included), the tools it may call and how to sample
    the next turn. When ``done``, ``reward`` is tracegen's and ``metadata`` holds the verdict."""

    problem_id: str = ""
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="The conversation so far, OpenAI's chat shape."
    )
    continue_final_message: bool = Field(
        default=False,
        description="Continue the assistant message that ends `messages` (no new turn).",
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Tools the turn may call, OpenAI's shape."
    )
    stop: list[str] = Field(default_factory=list, description="Stop strings for the turn.")
    sampling: dict[str, Any] = Field(
        default_factory=dict,
        description="temperature, top_p, top_k, seed, max_tokens for the turn.",
    )


class TracegenState(State):
    """The episode so far: its problem, the conversation, and once done the scored trace."""

    problem_id: str | None = None
    trace_id: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    done: bool = False
    reward: float | None = None
    trace: dict[str, Any] | None = Field(
        default=None, description="The tracegen trace record, once the episode has ended."
    )
