"""Episodes whose turns the caller answers (`tracegen.generate.handoff`), as the OpenEnv and
verifiers environments run them: the mode's conversation, tracegen's sandbox and judge."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.asgi import add_problems
from tracegen.config import RunSettings
from tracegen.errors import ConfigError
from tracegen.generate.handoff import HandedRuns, Reply, Turn, cut_at_stop
from tracegen.llm.base import ChatRequest
from tracegen.schema import ChatMessage, Trace

RIGHT = "<think>Add.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>"
WRONG = "<code>\ndef add(a, b):\n    return a - b\n</code>"


def _runs(tmp_path: Path, mode: str = "tool-feedback") -> HandedRuns:
    problems = add_problems(tmp_path / "add.jsonl", 2)
    return HandedRuns(
        RunSettings(mode=mode, problems=str(problems), sandbox="builtin", max_iterations=2)
    )


def test_a_reply_ends_at_the_first_stop_string() -> None:
    assert cut_at_stop("a<x>b<y>c", ["<y>", "<x>"]) == ("a", "stop")
    assert cut_at_stop("abc", ["<x>", ""]) == ("abc", None)


def test_a_reply_is_read_as_a_server_s_answer() -> None:
    turn = Turn(ChatRequest(messages=[ChatMessage(role="user", content="hi")]), continues=True)
    call = {"id": "c", "type": "function", "function": {"name": "python", "arguments": "{}"}}
    completion = Reply(
        content="x\n<result>", tool_calls=[call], prompt_ids=[1, 2], completion_ids=[3]
    ).completion(turn, "m")
    assert completion.content == "x\n<result>"  # no stop strings in this request
    assert completion.tool_calls[0].function.name == "python"
    assert completion.continuation == "prefill"
    assert (completion.prompt_ids, completion.completion_ids) == ([1, 2], [3])


def test_a_wrong_then_right_program_is_fed_back_and_judged(tmp_path: Path) -> None:
    runs = _runs(tmp_path)

    async def main() -> tuple[Turn, Trace]:
        try:
            episode = runs.episode(runs.spec("add0"))
            first = await episode.start()
            assert isinstance(first, Turn) and first.request.messages[-1].role == "user"
            second = await episode.answer(Reply(content=WRONG + "\n<result>all passed</result>"))
            assert isinstance(second, Turn)
            last = await episode.answer(Reply(content=RIGHT))
            assert isinstance(last, Trace)
            return second, last
        finally:
            await runs.aclose()

    second, trace = asyncio.run(main())
    feedback = second.request.messages[-1].content
    assert "<error>" in feedback and "all passed" not in second.request.messages[-2].content
    assert trace.success and trace.reward > 0.9 and trace.metrics.executions == 2


def test_each_episode_of_a_problem_is_a_new_sample(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    specs = [runs.spec("add1"), runs.spec("add1"), runs.spec()]
    assert [s.sample for s in specs] == [0, 1, 0]
    assert len({s.trace_id for s in specs}) == 3
    with pytest.raises(ConfigError, match="no problem 'nope'"):
        runs.spec("nope")


def test_an_episode_left_unanswered_is_cancelled(tmp_path: Path) -> None:
    runs = _runs(tmp_path)

    async def main() -> None:
        try:
            episode = runs.episode(runs.spec())
            assert isinstance(await episode.start(), Turn)
            await episode.aclose()
            with pytest.raises(RuntimeError, match="no turn is waiting"):
                await episode.answer(Reply(content=RIGHT))
        finally:
            await runs.aclose()

    asyncio.run(main())


def test_a_policy_sampled_elsewhere_is_never_constrained(tmp_path: Path) -> None:
    """The caller samples the policy itself: no grammar is asked for, whatever --constrain
    says, and the decision is the setup's, not written into the settings."""
    problems = add_problems(tmp_path / "add.jsonl", 1)
    settings = RunSettings(mode="tool-feedback", problems=str(problems), constrain="on")
    runs = HandedRuns(settings)
    assert runs.setup.choices.constrain is False
    assert runs.setup.header()["constrain"] is False
    assert runs.spec().choices.constrain is False
    assert runs.settings.constrain == "on"
