"""What every mode does when the server fails, a turn runs too long, or logprobs are missing."""

from __future__ import annotations

import pytest

from tests.support.episodes import RIGHT, WRONG, Episodes
from tests.support.fake_ollama import Fault, Reply
from tracegen.errors import AuthError, BadRequest, ModelNotFound
from tracegen.modes import MODE_NAMES

STUCK = "<think>" + "I am stuck. " * 120


@pytest.mark.parametrize("mode", MODE_NAMES)
async def test_an_overloaded_server_gives_a_failed_trace_not_an_exception(
    episodes: Episodes, mode: str
) -> None:
    episodes.fake.fail_next(Fault("status", status=503), Fault("status", status=503))
    trace = await episodes.run(mode)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("backend", "overloaded")
    assert [m.role for m in trace.messages] == ["system", "user"]
    assert (trace.success, trace.reward, trace.logprobs_status) == (False, -1.0, "not_requested")
    assert (trace.id, trace.mode, trace.model, trace.problem_id) == (
        "trace-1",
        mode,
        "test-model",
        "add",
    )


@pytest.mark.parametrize(
    ("status", "error"), [(404, ModelNotFound), (401, AuthError), (400, BadRequest)]
)
async def test_a_missing_model_or_bad_key_stops_the_run(
    episodes: Episodes, status: int, error: type[Exception]
) -> None:
    episodes.fake.fail_next(Fault("status", status=status))
    with pytest.raises(error):
        await episodes.run("inline-tools")


async def test_a_failure_mid_episode_keeps_the_turns_so_far_and_scores_them(
    episodes: Episodes,
) -> None:
    wrong = f"<think>Subtract.</think>\n<code>\n{WRONG}\n</code>"
    trace = await episodes.run("tool-feedback", wrong)  # the next request gets HTTP 500
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("backend", "server_error")
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "user"]
    assert trace.verdict is not None and trace.verdict.passed == 0
    assert trace.metrics.turns == 1 and trace.usage.requests == 1


@pytest.mark.parametrize("mode", MODE_NAMES)
async def test_a_model_repeating_itself_until_max_tokens_is_stopped_and_recorded(
    episodes: Episodes, mode: str
) -> None:
    trace = await episodes.run(mode, STUCK, max_tokens=200)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "repetition")
    assert trace.metrics.repetition_stops == 1 and trace.metrics.turns == 1
    assert trace.messages[-1].content.startswith("<think>I am stuck.")


async def test_a_turn_cut_by_max_tokens_is_a_recorded_failure(episodes: Episodes) -> None:
    reply = f"<think>Add.</think>\n<code>\n{RIGHT}\n</code>"
    trace = await episodes.run("markers", reply, max_tokens=6)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "max_tokens")
    assert trace.metrics.repetition_stops == 0 and not trace.success
    assert episodes.bodies()[0]["options"]["num_predict"] == 6


async def test_a_server_without_logprobs_is_recorded_as_absent(episodes: Episodes) -> None:
    solved = (
        f"<think>Add.</think>\n<code>\n{RIGHT}\n</code>\n<think>Ok.</think>\n<verify>3</verify>"
    )
    trace = await episodes.run("markers", Reply(content=solved, logprobs=False))
    assert trace.logprobs_status == "absent" and trace.logprobs == []
    assert trace.success


async def test_usage_hosts_and_timings_are_totalled_over_the_episode(episodes: Episodes) -> None:
    trace = await episodes.run(
        "tool-feedback",
        f"<think>Subtract.</think>\n<code>\n{WRONG}\n</code>",
        f"<think>Add.</think>\n<code>\n{RIGHT}\n</code>",
        top_logprobs=2,
    )
    assert trace.hosts == [episodes.fake.url]
    assert trace.usage.requests == trace.metrics.turns == 2
    assert trace.usage.completion_tokens == trace.metrics.completion_tokens > 0
    assert trace.metrics.prompt_tokens > 0 and trace.metrics.generation_s > 0
    assert trace.metrics.execution_s > 0 and trace.metrics.latency_s >= trace.metrics.execution_s
    assert all(len(t.top_logprobs) == 2 for lp in trace.logprobs for t in lp.tokens)
    assert all(b["top_logprobs"] == 2 for b in episodes.bodies())
