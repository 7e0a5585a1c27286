"""`run_episode`: any mode the caller resolves runs through it, and always gives a `Trace`
unless no other episode could survive the error."""

from __future__ import annotations

from typing import cast

import pytest

from tracegen.config import GenerationSettings
from tracegen.episode.engine import run_episode
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import AuthError, Overloaded
from tracegen.llm.base import Backend
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Problem, TestCase, Trace

SPEC = EpisodeSpec(
    problem=Problem(
        id="add", prompt="Add.", tests=[TestCase(name="t", kind="assert", code="pass")]
    ),
    sample=0,
    trace_id="trace-1",
    settings=GenerationSettings(mode="markers", model="test-model"),
    settings_hash="h",
    system_prompt="",
    seed=None,
)
NO_BACKEND = cast(Backend, None)
NO_SANDBOX = cast(CodeRunner, None)


class Raising:
    """A mode whose conversation ends in ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def run(self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner) -> Trace:
        raise self.error


class Talking:
    async def run(self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner) -> Trace:
        return Trace(**spec.identity())


async def test_the_given_mode_holds_the_conversation() -> None:
    trace = await run_episode(SPEC, Talking(), NO_BACKEND, NO_SANDBOX)
    assert (trace.id, trace.mode, trace.error) == ("trace-1", "markers", None)


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [
        (Overloaded("503"), "backend", "overloaded"),
        (RuntimeError("bug"), "internal", "unexpected_exception"),
    ],
)
async def test_a_failed_episode_is_a_trace_with_its_error(
    error: Exception, kind: str, reason: str
) -> None:
    trace = await run_episode(SPEC, Raising(error), NO_BACKEND, NO_SANDBOX)
    assert trace.error is not None
    assert (trace.id, trace.error.kind, trace.error.reason) == ("trace-1", kind, reason)


async def test_an_error_no_episode_survives_is_raised() -> None:
    with pytest.raises(AuthError):
        await run_episode(SPEC, Raising(AuthError("401")), NO_BACKEND, NO_SANDBOX)
