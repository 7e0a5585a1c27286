"""The model turns of one episode: requests built from the settings, the turn budget, and the
counters each completion adds to (tokens, time, hosts, usage)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import Any

from tracegen.episode.limits import EpisodeEnded, limit_reached, repeated_tail
from tracegen.episode.spec import EpisodeSpec
from tracegen.episode.transcript import Transcript
from tracegen.llm.base import Backend, ChatRequest, Completion, ContinueMethod, SamplingOptions
from tracegen.llm.grammar import Grammar
from tracegen.schema import Metrics, Usage


class Turns:
    """Asks the backend for each model turn, within ``max_steps`` turns of ``max_tokens``."""

    def __init__(
        self,
        spec: EpisodeSpec,
        backend: Backend,
        transcript: Transcript,
        metrics: Metrics,
        think: bool | None,
    ) -> None:
        self.spec = spec
        self.settings = spec.settings
        self.backend = backend
        self.transcript = transcript
        self.metrics = metrics
        self.think = think
        self.usage = Usage()
        self.hosts: list[str] = []
        self.continuation: ContinueMethod | None = None
        self.grammars: dict[str, str] = {}
        """The grammars decoding was constrained to, name → sha256 (``constrain`` on)."""

    def require_turn(self) -> None:
        """End the episode now if the model may not answer again."""
        if self.metrics.turns >= self.settings.max_steps:
            raise limit_reached(
                "max_steps", f"the episode used all {self.settings.max_steps} model turns"
            )

    def request(
        self,
        stop: Sequence[str],
        tools: list[dict[str, Any]] | None,
        grammar: Grammar | None = None,
    ) -> ChatRequest:
        """The next request; ``grammar`` constrains it when the run constrains decoding."""
        s = self.settings
        self.require_turn()
        if not self.spec.choices.constrain:
            grammar = None
        elif grammar is not None:
            self.grammars[grammar.name] = grammar.sha256
        options = SamplingOptions(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=self.spec.seed,
            max_tokens=s.max_tokens,
            context_tokens=s.num_ctx,
            stop=list(stop),
            grammar=grammar,
        )
        return ChatRequest(
            messages=list(self.transcript.messages),
            tools=tools,
            think=self.think,
            options=options,
            top_logprobs=s.top_logprobs,
            processed_logprobs=s.logprobs == "processed",
        )

    async def generate(
        self,
        stop: Sequence[str],
        tools: list[dict[str, Any]] | None = None,
        grammar: Grammar | None = None,
    ) -> Completion:
        """One model turn answering the messages so far."""
        return await self._count(self.backend.chat(self.request(stop, tools, grammar)))

    async def continue_assistant(
        self, stop: Sequence[str], grammar: Grammar | None = None
    ) -> Completion:
        """More of the assistant message that ends the conversation (prefill or raw)."""
        method = self.settings.continuation
        request = self.request(stop, None, grammar)
        completion = await self._count(self.backend.continue_message(request, method))
        self.continuation = completion.continuation
        return completion

    async def _count(self, call: Awaitable[Completion]) -> Completion:
        started = time.perf_counter()
        completion = await call
        m, u = self.metrics, self.usage
        m.generation_s += time.perf_counter() - started
        m.turns += 1
        m.prompt_tokens += completion.prompt_tokens
        m.completion_tokens += completion.completion_tokens
        u.requests += 1
        u.prompt_tokens += completion.prompt_tokens
        u.completion_tokens += completion.completion_tokens
        u.prompt_s += completion.prompt_s
        u.generation_s += completion.generation_s
        u.load_s += completion.load_s
        u.total_s += completion.total_s
        if completion.host and completion.host not in self.hosts:
            self.hosts.append(completion.host)
        return completion

    def check_cut(self, completion: Completion) -> None:
        """End the episode if the turn ran into ``max_tokens`` (a repeating tail says why)."""
        if completion.finish_reason != "length":
            return
        if repeated_tail(completion.content or completion.thinking):
            self.metrics.repetition_stops += 1
            raise EpisodeEnded("limit", "repetition", "the model repeated itself until max_tokens")
        raise limit_reached(
            "max_tokens", f"a model turn reached max_tokens={self.settings.max_tokens}"
        )
