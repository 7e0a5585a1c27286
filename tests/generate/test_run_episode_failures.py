"""What `run_episode` does with a server's failure: it stops the run only when no other episode
would survive it either, and records every other one in the episode's trace."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.episodes import ADD
from tracegen.config import GenerationSettings
from tracegen.episode.engine import run_episode
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    BadRequest,
    LogprobsMissing,
    ModelNotFound,
    Overloaded,
    ProtocolError,
    UnreadableServer,
)
from tracegen.schema import Trace


class Failing:
    """A mode whose server fails with ``error`` on the first request."""

    name = "markers"
    continues_message = False
    constrain_auto = False
    reads_tool_calls = False

    def __init__(self, error: BackendError) -> None:
        self.error = error

    async def run(self, spec: EpisodeSpec, backend: Any, sandbox: Any) -> Trace:
        raise self.error


async def episode_failing_with(error: BackendError) -> Trace:
    settings = GenerationSettings(mode="markers", model="test-model")
    spec = EpisodeSpec(
        problem=ADD,
        sample=0,
        trace_id="trace-1",
        settings=settings,
        settings_hash=settings.digest(""),
        system_prompt="",
        seed=7,
    )
    return await run_episode(spec, Failing(error), backend=None, sandbox=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        ModelNotFound("model m not found"),
        AuthError("key rejected"),
        BadRequest("rejected"),
        UnreadableServer("5 unreadable answers"),
        LogprobsMissing("no logprobs"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_a_failure_no_other_episode_would_survive_stops_the_run(error: BackendError) -> None:
    with pytest.raises(type(error)):
        await episode_failing_with(error)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Overloaded("busy"), "overloaded"),
        (BackendTimeout("slow"), "timeout"),
        (ProtocolError("not JSON"), "protocol_error"),
        (BackendError("gave up"), "backend_error"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
async def test_a_server_failure_of_one_episode_is_recorded_in_its_trace(
    error: BackendError, reason: str
) -> None:
    trace = await episode_failing_with(error)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason, trace.error.message) == (
        "backend",
        reason,
        str(error),
    )
    assert trace.success is False
