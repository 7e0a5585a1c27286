"""Prompts and completions as TRL gives them to reward functions, read as tracegen's messages.

TRL (``grpo_trainer.py``, trl 1.16.0) passes each completion as a string (a plain-text
dataset) or as a list of messages (a conversational one): ``{"role", "content"}`` with
``tool_calls`` (``{"type": "function", "function": {"name", "arguments"}}``) on assistant
messages and ``tool`` messages holding what the tools answered. ``content`` may be a list of
parts (``{"type": "text", "text": …}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from tracegen.schema import ChatMessage, ToolCall

Completion = str | Sequence[Mapping[str, Any]]
ROLES = ("system", "user", "assistant", "tool")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def assistant_texts(completion: Completion | None) -> list[str]:
    """The text of each assistant reply of ``completion`` (a string is one reply)."""
    if completion is None:
        return []
    if isinstance(completion, str):
        return [completion]
    return [
        _text(m.get("content"))
        for m in completion
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]


def _tool_calls(message: Mapping[str, Any]) -> list[ToolCall] | None:
    calls = message.get("tool_calls")
    if not calls:
        return None
    try:
        return [ToolCall.model_validate(c) for c in calls]
    except (ValidationError, TypeError):
        return None


def chat_messages(messages: Completion | None) -> list[ChatMessage]:
    """``messages`` (a prompt or a completion) as tracegen's messages; a string is one
    assistant message, a message of an unknown role is left out."""
    if messages is None:
        return []
    if isinstance(messages, str):
        return [ChatMessage(role="assistant", content=messages)]
    return [
        ChatMessage(
            role=m["role"],
            content=_text(m.get("content")),
            tool_calls=_tool_calls(m),
            tool_name=m.get("name") if m["role"] == "tool" else None,
        )
        for m in messages
        if isinstance(m, Mapping) and m.get("role") in ROLES
    ]
