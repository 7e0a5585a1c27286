"""Score, success, reward and is_ideal; math answers graded by value."""

from __future__ import annotations

import pytest

from tests.support.episodes import TWICE
from tracegen.grading.answers import grade_answer
from tracegen.grading.reward import RewardWeights, rescore
from tracegen.schema import ExecResult, Metrics, TestResult, Trace, TraceError


def trace_with(passed: int, total: int, **extra: object) -> Trace:
    tests = [TestResult(name=f"t{i}", passed=i < passed) for i in range(total)]
    verdict = ExecResult(status="ok" if passed == total else "failed", tests=tests)
    return Trace(id="t", problem_id="p", mode="markers", model="m", verdict=verdict, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("passed", "structure_ok", "metrics", "reward"),
    [
        (2, True, Metrics(), 1.0),
        (1, False, Metrics(), 0.0),
        (1, True, Metrics(), 0.1),
        (0, False, Metrics(), -1.0),
        (2, False, Metrics(hallucinated_results=1, parse_failures=2), 0.8),
        (0, True, Metrics(hallucinated_results=5), -1.0),
    ],
)
def test_reward_is_two_score_minus_one_plus_structure_terms_clamped(
    passed: int, structure_ok: bool, metrics: Metrics, reward: float
) -> None:
    trace = rescore(trace_with(passed, 2, metrics=metrics), structure_ok)
    assert trace.score == passed / 2 and trace.success == (passed == 2)
    assert trace.reward == pytest.approx(reward)
    assert trace.is_ideal == (passed == 2 and structure_ok)


def test_reward_weights_are_configurable() -> None:
    weights = RewardWeights(structure_bonus=0.5, failed_episode=-0.5)
    assert rescore(trace_with(1, 2), True, weights).reward == pytest.approx(0.5)
    error = TraceError(kind="limit", reason="max_steps", message="out of steps")
    failed = rescore(trace_with(2, 2, error=error), True, weights)
    assert (failed.success, failed.is_ideal, failed.reward, failed.score) == (
        False,
        False,
        -0.5,
        1.0,
    )


def test_no_verdict_scores_zero() -> None:
    trace = rescore(Trace(id="t", problem_id="p", mode="markers", model="m"), True)
    assert (trace.score, trace.success, trace.reward) == (0.0, False, -0.9)


def test_math_answers_are_graded_by_value() -> None:
    assert grade_answer(TWICE, "18.0").status == "ok"
    wrong = grade_answer(TWICE, "17")
    assert wrong.status == "failed" and wrong.tests[0].actual == "17"
    assert grade_answer(TWICE, None).tests[0].passed is False
