"""Score, success, reward and is_ideal of a trace; the formula is in docs/modes.md.

- ``score`` = passed / total tests of the final program (or final answer);
- ``success`` = every test passed and the episode ended without an error;
- ``reward`` = clamp(2·score − 1 + structure_bonus·[structure met]
  − hallucination_penalty·hallucinated_results − parse_failure_penalty·parse_failures,
  −1, 1); an episode that ended in an error gets ``failed_episode``;
- ``is_ideal`` = success and the mode's structure criteria.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tracegen.schema import ExecResult, Trace


class RewardWeights(BaseModel):
    """The terms of the reward; change them to reshape rewards (`rescore` recomputes)."""

    model_config = ConfigDict(extra="forbid")

    structure_bonus: float = 0.1
    hallucination_penalty: float = 0.1
    parse_failure_penalty: float = 0.05
    failed_episode: float = -1.0


DEFAULT_WEIGHTS = RewardWeights()


def score_of(verdict: ExecResult | None) -> float:
    if verdict is None or verdict.total == 0:
        return 0.0
    return verdict.passed / verdict.total


def reward(trace: Trace, structure_ok: bool, weights: RewardWeights = DEFAULT_WEIGHTS) -> float:
    """The RL reward of a scored trace (see the module docstring)."""
    if trace.error is not None:
        return weights.failed_episode
    value = (
        2 * trace.score
        - 1
        + weights.structure_bonus * structure_ok
        - weights.hallucination_penalty * trace.metrics.hallucinated_results
        - weights.parse_failure_penalty * trace.metrics.parse_failures
    )
    return max(-1.0, min(1.0, value))


def rescore(trace: Trace, structure_ok: bool, weights: RewardWeights = DEFAULT_WEIGHTS) -> Trace:
    """Set ``score``, ``success``, ``reward`` and ``is_ideal`` from the verdict and error."""
    trace.score = score_of(trace.verdict)
    trace.success = trace.error is None and trace.verdict is not None and trace.score == 1.0
    trace.reward = reward(trace, structure_ok, weights)
    trace.is_ideal = trace.success and structure_ok
    return trace
