"""A problem's episodes as an Atropos group, the W&B means, and pass@k (pure parts of
`tracegen.atropos`, no atroposlib)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback
from tracegen.atropos.groups import EpisodeMeans, eval_ks, pass_rates, scored_group
from tracegen.export.rl import MASKED, MASKED_LOGPROB
from tracegen.schema import Trace, TraceError


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ChatmlModel:
    return ChatmlModel(make_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer"))


def test_a_group_has_one_sample_per_episode_with_its_reward(model: ChatmlModel) -> None:
    traces = [tool_feedback(model, 0), inline_tools(model, 1), inline_tools(model, 2)]
    group = scored_group(traces, group_size=3)
    data = group.data
    assert data is not None and not group.dropped
    assert data["scores"] == [t.reward for t in traces] == [1.0, 0.5, 1.0]
    assert "group_overrides" not in data
    for trace, tokens, masks, logprobs, messages in zip(
        traces,
        data["tokens"],
        data["masks"],
        data["inference_logprobs"],
        data["messages"],
        strict=True,
    ):
        assert len(tokens) == len(masks) == len(logprobs)
        first = trace.token_requests[0]
        prompt = len(first.prompt_ids)
        assert tokens[:prompt] == first.prompt_ids
        assert masks[:prompt] == [MASKED] * prompt
        trained = [t for t, m in zip(tokens, masks, strict=True) if m != MASKED]
        sampled = [i for r in trace.token_requests for i in r.completion_ids]
        assert trained == sampled, "every sampled id is trained, nothing tracegen wrote is"
        recorded = [lp for r in trace.token_requests for lp in r.logprobs or []]
        assert [lp for lp, m in zip(logprobs, masks, strict=True) if m != MASKED] == recorded
        assert {lp for lp, m in zip(logprobs, masks, strict=True) if m == MASKED} == {
            MASKED_LOGPROB
        }
        assert [m["content"] for m in messages] == [m.content for m in trace.messages]


def test_a_failed_episode_stays_in_its_group_with_its_reward(model: ChatmlModel) -> None:
    ended = tool_feedback(model, 1).model_copy(
        update={
            "reward": -1.0,
            "success": False,
            "error": TraceError(kind="limit", reason="max_steps", message="out of turns"),
        }
    )
    group = scored_group([tool_feedback(model, 0), ended], group_size=2)
    assert group.data is not None and group.data["scores"] == [1.0, -1.0]


def test_an_episode_without_a_model_token_is_left_out_and_named(model: ChatmlModel) -> None:
    never = Trace(
        id="x",
        problem_id="add",
        sample=3,
        mode="tool-feedback",
        model="m",
        error=TraceError(kind="backend", reason="unavailable", message="down"),
    )
    group = scored_group([tool_feedback(model, 0), never], group_size=2)
    assert group.data is not None and len(group.data["tokens"]) == 1
    assert group.data["group_overrides"] == {"group_size": 1}
    assert len(group.dropped) == 1 and group.dropped[0].startswith("add sample 3: without exact")
    assert scored_group([never], group_size=1).data is None


def test_a_split_episode_gives_a_sample_per_turn_and_bad_ids_are_left_out(
    model: ChatmlModel,
) -> None:
    trace = tool_feedback(model, 0)
    first = trace.token_requests[0]
    first.completion_ids = [5] * len(first.completion_ids)  # no longer the text, nor a prefix
    group = scored_group([trace], group_size=1)
    assert group.data is not None
    assert len(group.data["tokens"]) == 2, "the two other turns, each a sample"
    assert group.data["group_overrides"] == {"group_size": 2}
    assert group.data["scores"] == [1.0, 1.0]
    assert len(group.dropped) == 1 and "is not in the decoded ids" in group.dropped[0]


def test_retokenized_ids_are_used_only_when_a_tokenizer_is_given(
    model: ChatmlModel, tmp_path: Path
) -> None:
    from tracegen.export.tokens.tokenizer import load_tokenizer

    bare = tool_feedback(model, 0).model_copy(update={"token_requests": []})
    assert scored_group([bare], 1).data is None
    tokenizer = load_tokenizer(model.tokenizer_dir)
    try:
        group = scored_group([bare], 1, tokenizer)
    finally:
        tokenizer.close()
    assert group.data is not None and group.data["scores"] == [1.0]


def test_episode_means_are_taken_and_start_again(model: ChatmlModel) -> None:
    means = EpisodeMeans()
    assert means.take() == {}
    good, half = tool_feedback(model, 0), inline_tools(model, 1)
    good.metrics.executions, half.metrics.executions = 2, 1
    means.add(good)
    means.add(half)
    out = means.take()
    assert out["train/success_rate"] == 0.5
    assert out["train/reward"] == 0.75
    assert out["train/executions_per_episode"] == 1.5
    assert out["train/episodes"] == 2.0
    assert means.take() == {}


def test_pass_rates_average_over_problems() -> None:
    def trace(problem: str, sample: int, success: bool) -> Trace:
        return Trace(id=f"{problem}{sample}", problem_id=problem, sample=sample, mode="m",
                     model="m", success=success)  # fmt: skip

    traces = [trace("a", 0, True), trace("a", 1, False), trace("b", 0, False), trace("b", 1, False)]
    assert pass_rates(traces, [1, 2]) == {"1": pytest.approx(0.25), "2": pytest.approx(0.5)}
    assert eval_ks(1) == [1] and eval_ks(10) == [1, 2, 4, 8, 10]


def test_a_group_the_environment_failed_is_not_scored(model: ChatmlModel) -> None:
    from tracegen.atropos.groups import environment_failure

    ok = tool_feedback(model, 0)
    limit = ok.model_copy(
        update={"error": TraceError(kind="limit", reason="max_steps", message="out of turns")}
    )
    assert environment_failure([ok, limit]) is None, "a limit is the policy's doing"
    down = ok.model_copy(
        update={
            "sample": 1,
            "error": TraceError(kind="backend", reason="unavailable", message="server down"),
        }
    )
    assert environment_failure([ok, down]) == "add sample 1: server down"


def test_a_group_says_which_logprobs_each_sample_carries(model: ChatmlModel) -> None:
    constrained = inline_tools(model, 1).model_copy(
        update={"logprobs_kind": "processed", "grammars": {"inline": "0" * 64}}
    )
    free = tool_feedback(model, 0).model_copy(update={"logprobs_kind": "processed"})
    data = scored_group([free, constrained], group_size=2).data
    assert data is not None
    assert data["generation_params"] == {
        "logprobs_kinds": ["processed", "processed under a grammar"]
    }
