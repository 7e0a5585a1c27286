"""An episode whose model is outside tracegen: each turn is handed to the caller.

RL hubs such as OpenEnv and verifiers sample the policy themselves and hand the environment
the text. `HandedEpisode` runs the episode exactly as `tracegen run` does (the mode's
conversation, the sandbox, the judge: whatever runs it, given a backend) with a backend,
`HandedBackend`, whose every request becomes a `Turn` the caller answers with a `Reply`.
The mode never knows: stop sequences, tool calls, continued assistant messages, budgets and
the final verdict are its own, as in any run.

A reply is read as a server's answer would be: its text ends at the first of the request's
stop strings (removed, as servers remove them), a tool call comes as OpenAI's shape, and
exact token ids and logprobs, when the caller has them, are kept in the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracegen.config import ContinueChoice, RunSettings
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import ConfigError
from tracegen.generate.setup import decide
from tracegen.generate.worker import EpisodeWorker
from tracegen.llm.base import (
    ChatRequest,
    Completion,
    FinishReason,
    check_ids,
    token_logprobs,
)
from tracegen.llm.openai import _tool_call as openai_tool_call
from tracegen.schema import Trace

HOST = "policy"
"""What a trace names as the host of a handed turn."""


@dataclass(frozen=True)
class Turn:
    """A model turn asked of the caller: answer ``request`` (its messages, tools and stop
    strings); when ``continues``, the reply continues the assistant message that ends it."""

    request: ChatRequest
    continues: bool


class Reply(BaseModel):
    """The caller's answer to a `Turn`, as a model server would give it."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(default="", description="The text the model wrote.")
    thinking: str = Field(default="", description="Reasoning the server returned apart.")
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Tool calls in OpenAI's shape: {id, type, function: {name, arguments}}, "
        "arguments a JSON string or object.",
    )
    finish_reason: FinishReason | None = Field(
        default=None, description="stop, length or tool_calls, as the server said."
    )
    prompt_ids: list[int] | None = Field(
        default=None, description="The token ids of the whole prompt the policy was given."
    )
    completion_ids: list[int] | None = Field(
        default=None, description="Every token id the policy sampled."
    )
    logprobs: list[dict[str, Any]] | None = Field(
        default=None,
        description="The sampled tokens' logprobs as OpenAI's logprobs.content entries "
        "({token, logprob, top_logprobs, id?}).",
    )

    def completion(self, turn: Turn, model: str) -> Completion:
        """The reply as the `Completion` a server's answer to ``turn`` would be."""
        content, finish = cut_at_stop(self.content, turn.request.options.stop)
        calls = [openai_tool_call(c, i, HOST) for i, c in enumerate(self.tool_calls)]
        reason = self.finish_reason or finish or ("tool_calls" if calls else "stop")
        prompt_ids = None if self.prompt_ids is None else check_ids(self.prompt_ids, None, HOST)
        sampled = None
        if self.completion_ids is not None:
            sampled = check_ids(self.completion_ids, None, HOST)
        return Completion(
            content=content,
            thinking=self.thinking,
            tool_calls=calls,
            logprobs=None if self.logprobs is None else token_logprobs(self.logprobs, HOST),
            finish_reason=reason,
            prompt_tokens=len(prompt_ids or ()),
            completion_tokens=len(sampled or ()),
            host=HOST,
            model=model,
            continuation="prefill" if turn.continues else None,
            prompt_ids=prompt_ids,
            completion_ids=sampled,
        )


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, FinishReason | None]:
    """``text`` up to the first of ``stop`` (removed, as a server removes it), and ``stop``
    when one was found."""
    found = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    if not found:
        return text, None
    return text[: min(found)], "stop"


class HandedBackend:
    """A `tracegen.llm.base.Backend` whose every request is handed out as a `Turn`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.turns: asyncio.Queue[tuple[Turn, asyncio.Future[Completion]]] = asyncio.Queue()

    async def chat(self, request: ChatRequest) -> Completion:
        return await self._hand(Turn(request, continues=False))

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        return await self._hand(Turn(request, continues=True))

    async def _hand(self, turn: Turn) -> Completion:
        answer: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        await self.turns.put((turn, answer))
        return await answer


RunEpisode = Callable[[HandedBackend], Awaitable[Trace]]
"""Runs one episode on the backend given (the mode's conversation, sandbox and judge)."""


class HandedEpisode:
    """One episode run on a `HandedBackend`: `start` gives the first `Turn`, each `answer`
    the next one, until the episode ends and the scored `Trace` comes back instead."""

    def __init__(self, run: RunEpisode, model: str) -> None:
        self.backend = HandedBackend(model)
        self._run = run
        self._task: asyncio.Task[Trace] | None = None
        self._pending: tuple[Turn, asyncio.Future[Completion]] | None = None
        self.trace: Trace | None = None

    @property
    def turn(self) -> Turn | None:
        """The turn waiting for its reply, if any."""
        return self._pending[0] if self._pending else None

    async def start(self) -> Turn | Trace:
        self._task = asyncio.ensure_future(self._run(self.backend))
        return await self._next()

    async def answer(self, reply: Reply) -> Turn | Trace:
        if self._pending is None:
            raise RuntimeError("no turn is waiting for a reply: the episode has ended")
        turn, future = self._pending
        self._pending = None
        try:
            completion = reply.completion(turn, self.backend.model)
        except Exception as e:
            future.set_exception(e)
        else:
            future.set_result(completion)
        return await self._next()

    async def _next(self) -> Turn | Trace:
        assert self._task is not None
        asked = asyncio.ensure_future(self.backend.turns.get())
        await asyncio.wait({asked, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            self._pending = asked.result()
            return self._pending[0]
        asked.cancel()
        self.trace = self._task.result()
        return self.trace

    def cancel(self) -> None:
        """Stop the episode (its turn is never answered)."""
        self._pending = None
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def aclose(self) -> None:
        self.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


class HandedRuns:
    """A process's handed episodes: the problems, the plan, the mode and one warm sandbox
    they share, resolved once from ``settings`` as ``tracegen run`` resolves them."""

    def __init__(self, settings: RunSettings) -> None:
        self.setup = decide(settings, sampled_elsewhere=True)
        self.settings = self.setup.settings
        self.mode = self.setup.mode
        self.problems = self.setup.problems
        self.by_id = {p.id: p for p in self.problems}
        self.plan = self.setup.plan_for(self.problems, 1)
        self._worker: EpisodeWorker | None = None
        self._opening = asyncio.Lock()
        self._started = 0
        self._samples: dict[str, int] = {}

    def spec(self, problem_id: str | None = None) -> EpisodeSpec:
        """The next episode: of ``problem_id`` when given, else of the next problem in turn;
        each episode of a problem is a new sample (its own trace id and seed)."""
        if problem_id is None:
            problem = self.problems[self._started % len(self.problems)]
        elif problem_id in self.by_id:
            problem = self.by_id[problem_id]
        else:
            raise ConfigError(f"no problem {problem_id!r} in {self.setup.problem_set}")
        self._started += 1
        sample = self._samples.get(problem.id, 0)
        self._samples[problem.id] = sample + 1
        return self.plan.spec(problem, sample)

    async def worker(self) -> EpisodeWorker:
        """The warm worker every handed episode of the process runs on."""
        async with self._opening:
            if self._worker is None:
                self._worker = await EpisodeWorker(self.settings).open()
        return self._worker

    def episode(self, spec: EpisodeSpec) -> HandedEpisode:
        """``spec``'s episode, its turns handed to the caller."""

        async def run(backend: HandedBackend) -> Trace:
            return await (await self.worker()).run(spec, backend)

        return HandedEpisode(run, self.setup.model)

    async def aclose(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await worker.aclose()
