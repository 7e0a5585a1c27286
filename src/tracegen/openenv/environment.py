"""`TracegenOpenEnv`: tracegen's episodes as an OpenEnv `Environment` (``openenv`` 0.10).

``reset`` starts an episode (the next problem in turn, or ``problem_id``) and returns the
prompt; each ``step`` takes the policy's turn (text, or a tool call in ``native-tools``),
runs it the mode's way (code executed in tracegen's sandbox, the result fed back) and
returns the conversation to answer next; when the mode ends the episode, the observation
is ``done`` with tracegen's reward: ``2·score − 1`` plus the mode's structure bonuses,
clamped to [−1, 1], where ``score`` is the share of the problem's tests the final program
passes, judged as ``tracegen run`` judges it (`tracegen.grading.reward`). ``state`` is the
episode so far and, once done, its trace record.

Sessions are concurrent (one instance a WebSocket session, OpenEnv's own server): every
instance of a process shares one warm sandbox and the problem set (`HandedRuns`); each
episode runs on the server's event loop, waiting for the policy's turns.

Sources: ``openenv/core/env_server/interfaces.py`` (``Environment``), ``types.py``,
``http_server.py`` (``create_app``; ``reset_async``/``step_async`` run on the server's loop).
"""

from __future__ import annotations

import asyncio
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from tracegen.generate.handoff import HandedEpisode, HandedRuns, Turn
from tracegen.llm.openai import openai_messages
from tracegen.openenv.models import TracegenAction, TracegenObservation, TracegenState
from tracegen.schema import Trace

REWARD = (
    "tracegen's reward: 2·score − 1 plus the mode's structure bonuses, clamped to [−1, 1]; "
    "score = tests passed / tests, the final program judged in tracegen's sandbox"
)


class NoEpisode(RuntimeError):
    """A step with no episode waiting for it: before ``reset``, or through OpenEnv's
    stateless ``POST /step``, which makes a new environment for each request."""


SYNC = (
    "tracegen's episodes run on the server's event loop: use reset_async and step_async "
    "(OpenEnv's server and clients do)"
)


class TracegenOpenEnv(Environment[TracegenAction, TracegenObservation, TracegenState]):
    """tracegen's problems, modes, sandbox and judge as an OpenEnv environment."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, runs: HandedRuns) -> None:
        super().__init__()
        self.runs = runs
        self._episode: HandedEpisode | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = TracegenState()

    def get_metadata(self) -> EnvironmentMetadata:
        s = self.runs.settings
        return EnvironmentMetadata(
            name="tracegen",
            description=f"{len(self.runs.problems)} problems ({s.problems}), mode {s.mode}; "
            f"{REWARD}",
            version=_version(),
        )

    # ------------------------------------------------------------ the episode

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        problem_id: str | None = None,
        **kwargs: Any,
    ) -> TracegenObservation:
        """Start an episode of ``problem_id`` (default: the next problem in turn)."""
        await self._end()
        self._loop = asyncio.get_running_loop()
        spec = self.runs.spec(problem_id)
        self._episode = self.runs.episode(spec)
        self._state = TracegenState(
            episode_id=episode_id or spec.trace_id,
            problem_id=spec.problem.id,
            trace_id=spec.trace_id,
        )
        return self._observe(await self._episode.start())

    async def step_async(
        self, action: TracegenAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TracegenObservation:
        """The policy's turn, run the mode's way; the next turn to answer, or the end."""
        if self._episode is None or self._episode.turn is None:
            raise NoEpisode("no episode is waiting for a turn: call reset first")
        self._state.step_count += 1
        return self._observe(await self._episode.answer(action.reply()))

    def _observe(self, event: Turn | Trace) -> TracegenObservation:
        problem_id = self._state.problem_id or ""
        if isinstance(event, Trace):
            messages = openai_messages(event.messages)
            self._state.messages = messages
            self._state.done = True
            self._state.reward = event.reward
            self._state.trace = event.model_dump(mode="json", by_alias=True)
            return TracegenObservation(
                problem_id=problem_id,
                messages=messages,
                done=True,
                reward=event.reward,
                metadata=_verdict(event),
            )
        request = event.request
        messages = openai_messages(request.messages)
        self._state.messages = messages
        o = request.options
        sampling = {
            "temperature": o.temperature,
            "top_p": o.top_p,
            "top_k": o.top_k,
            "seed": o.seed,
            "max_tokens": o.max_tokens,
        }
        return TracegenObservation(
            problem_id=problem_id,
            messages=messages,
            continue_final_message=event.continues,
            tools=request.tools,
            stop=list(o.stop),
            sampling={k: v for k, v in sampling.items() if v is not None},
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError(SYNC)

    def step(self, action: TracegenAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError(SYNC)

    @property
    def state(self) -> TracegenState:
        return self._state

    async def _end(self) -> None:
        if self._episode is not None:
            episode, self._episode = self._episode, None
            await episode.aclose()

    def close(self) -> None:
        """Stop the episode in flight (OpenEnv calls this from a worker thread)."""
        episode, loop = self._episode, self._loop
        if episode is None:
            return
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(episode.cancel)
        else:
            episode.cancel()


def _verdict(trace: Trace) -> dict[str, Any]:
    verdict = trace.verdict
    return {
        "trace_id": trace.id,
        "score": trace.score,
        "success": trace.success,
        "verdict": None if verdict is None else verdict.status,
        "error": None if trace.error is None else trace.error.message,
    }


def _version() -> str:
    from tracegen import __version__

    return __version__
