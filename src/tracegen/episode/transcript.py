"""The record of one episode's conversation: messages exactly as exchanged, typed steps
(model or system), and the logprobs of each assistant message.

``logprobs`` keeps one list of tokens per assistant message. In inline-tools, whose one
assistant message grows over several requests, its tokens are those of every continuation
in order; text the system inserts (``<tool_response>``, a closing tag a stop sequence
removed) has no tokens. ``status`` is ``absent`` when any completion came back without
logprobs, ``present`` when every one had them, ``not_requested`` when no model turn completed.
"""

from __future__ import annotations

from tracegen.llm.base import Completion
from tracegen.parsing.segment import segment, strip_system_tags
from tracegen.schema import (
    ChatMessage,
    Language,
    LogprobsKind,
    LogprobsStatus,
    Metrics,
    Role,
    Step,
    StepKind,
    TokenLogprob,
    TokenRequest,
    ToolCall,
    TurnLogprobs,
)


class Transcript:
    """Messages, steps and logprobs of one episode; counts what the model wrote into ``metrics``."""

    def __init__(self, system_prompt: str, task: str, metrics: Metrics) -> None:
        self.messages = [
            ChatMessage(role="system", content=system_prompt),
            ChatMessage(role="user", content=task),
        ]
        self.steps: list[Step] = []
        self.metrics = metrics
        self._logprobs: dict[int, list[TokenLogprob]] = {}
        self._logprobs_missing: set[int] = set()
        self._logprobs_kinds: set[LogprobsKind] = set()
        self.token_requests: list[TokenRequest] = []

    def strip(self, text: str) -> str:
        """The model's text without the system tags it wrote itself (counted)."""
        clean, stripped = strip_system_tags(text)
        self.metrics.hallucinated_results += stripped
        return clean

    def count_strategy(self, strategy: str) -> None:
        """A tool call was read (``strict``, ``escaped``, ``extracted``, ``native``)."""
        counts = self.metrics.parse_strategies
        counts[strategy] = counts.get(strategy, 0) + 1

    def add_assistant(
        self,
        completion: Completion,
        content: str,
        tool_calls: list[ToolCall] | None = None,
        said: str | None = None,
    ) -> int:
        """Append the model's turn (``content`` as kept) and its native thinking; its index.

        ``said`` is the model's text whose tokens are kept, when it is not ``content`` (tool
        calls taken out of the text are still the model's tokens).
        """
        thinking = completion.thinking or None
        message = ChatMessage(
            role="assistant", content=content, thinking=thinking, tool_calls=tool_calls or None
        )
        self.messages.append(message)
        index = len(self.messages) - 1
        if thinking:
            self.steps.append(Step(kind="think", text=thinking, message_index=index))
        self._add_logprobs(index, completion, content if said is None else said)
        return index

    def extend_assistant(self, completion: Completion, text: str) -> None:
        """Append the model's continuation to the last (assistant) message."""
        message = self.messages[-1]
        message.content += text
        if completion.thinking:
            message.thinking = (message.thinking or "") + completion.thinking
        self._add_logprobs(len(self.messages) - 1, completion, text)

    def add_message(self, role: Role, content: str, tool_name: str | None = None) -> int:
        """A message the system writes (feedback, a nudge, a tool result); its index."""
        self.messages.append(ChatMessage(role=role, content=content, tool_name=tool_name))
        return len(self.messages) - 1

    def append_system_text(
        self, kind: StepKind, text: str, body: str, exec_index: int | None = None
    ) -> None:
        """Text the system writes into the last (assistant) message; ``body`` is its step."""
        self.messages[-1].content += text
        self.system_step(kind, body, len(self.messages) - 1, exec_index)

    def model_steps(self, text: str, index: int, open_tag: str | None = None) -> list[Step]:
        """The typed steps of model text in message ``index``, added to the record;
        ``open_tag`` is a block the text continues (opened in an earlier piece)."""
        prefix = f"<{open_tag}>" if open_tag else ""
        steps = segment(prefix + text)
        for step in steps:
            step.message_index = index
        self.steps.extend(steps)
        return steps

    def system_step(
        self, kind: StepKind, text: str, index: int, exec_index: int | None = None
    ) -> None:
        self.steps.append(
            Step(kind=kind, text=text, source="system", message_index=index, exec_index=exec_index)
        )

    def model_code(self) -> list[str]:
        return [s.text for s in self.steps if s.kind == "code" and s.source == "model"]

    def language_of(self, code: str) -> Language | None:
        """The language the fence of the model's last code block holding ``code`` named."""
        for step in reversed(self.steps):
            if step.kind == "code" and step.source == "model" and step.text == code:
                return step.language
        return None

    def assistant_replies(self) -> list[str]:
        return [m.content for m in self.messages if m.role == "assistant"]

    def _add_logprobs(self, index: int, completion: Completion, kept: str) -> None:
        if completion.prompt_ids is not None and completion.completion_ids is not None:
            sampled = [t.logprob for t in completion.logprobs or []]
            self.token_requests.append(
                TokenRequest(
                    message_index=index,
                    prompt_ids=completion.prompt_ids,
                    completion_ids=completion.completion_ids,
                    logprobs=sampled if len(sampled) == len(completion.completion_ids) else None,
                )
            )
        if completion.logprobs is None:
            self._logprobs_missing.add(index)
            return
        self._logprobs_kinds.add(completion.logprobs_kind)
        tokens = completion.logprobs
        if len(kept) < len(completion.content):
            tokens = _prefix(tokens, len(completion.thinking) + len(kept))
        self._logprobs.setdefault(index, []).extend(tokens)

    def logprobs(self) -> list[TurnLogprobs]:
        return [
            TurnLogprobs(message_index=i, tokens=t)
            for i, t in sorted(self._logprobs.items())
            if i not in self._logprobs_missing
        ]

    def logprobs_kind(self) -> LogprobsKind:
        """The kind of every turn's logprobs when they agree, else ``unknown``."""
        return next(iter(self._logprobs_kinds)) if len(self._logprobs_kinds) == 1 else "unknown"

    def logprobs_status(self) -> LogprobsStatus:
        if self._logprobs_missing:
            return "absent"
        turns = sum(m.role == "assistant" for m in self.messages)
        return "present" if turns else "not_requested"


def _prefix(tokens: list[TokenLogprob], chars: int) -> list[TokenLogprob]:
    """The tokens that produced the first ``chars`` characters of a turn."""
    kept: list[TokenLogprob] = []
    length = 0
    for token in tokens:
        if length >= chars:
            break
        kept.append(token)
        length += len(token.token)
    return kept
