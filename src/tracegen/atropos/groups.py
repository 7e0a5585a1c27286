"""A problem's episodes as one Atropos ``ScoredDataGroup``, what they say for W&B, and pass@k.

Pure functions over `Trace`s: the environment (`tracegen.atropos.env`) runs the episodes,
these shape them. The token ids and masks are `tracegen.export.rl`'s, as ``convert --rl
atropos`` writes them, each sample checked the same way before it is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracegen.export.builder import Skipped
from tracegen.export.rl import atropos_sample, check_atropos
from tracegen.export.tokens.sequences import Decoder, token_episode
from tracegen.grading.filters import NOT_THE_MODELS
from tracegen.schema import Trace
from tracegen.views.pass_at_k import pass_at_k

if TYPE_CHECKING:
    from tracegen.export.tokens.tokenizer import Tokenizer


@dataclass
class Group:
    """The ``ScoredDataGroup`` of a problem's episodes (None when none gave a sample), and
    each episode left out with why."""

    data: dict[str, Any] | None
    dropped: list[str] = field(default_factory=list)
    episodes: int = 0


def scored_group(
    traces: Sequence[Trace],
    group_size: int,
    tokenizer: Tokenizer | None = None,
    decode: Decoder | None = None,
) -> Group:
    """One sample per episode, failed and limit-ended ones included with their reward.

    ``tokens`` is what the model saw and sampled, ``masks`` the token id where it was
    sampled and -100 on the prompt and on what tracegen wrote, ``inference_logprobs`` the
    server's logprob of each sampled token (1.0 elsewhere), ``scores`` tracegen's reward.
    Without ``tokenizer`` only exact ids are used; with it, an episode without them is
    tokenized from its text. An episode whose prompts do not extend each other gives one
    sample per request (each with its reward); a group whose count then differs from
    ``group_size`` says so in ``group_overrides``. An episode with no model-sampled token (it
    failed before the model answered) or whose ids do not decode to its text is left out;
    ``decode`` is the policy's tokenizer's (default: the token texts the server returned,
    which llama.cpp's server does not give exactly per id).
    """
    samples: list[dict[str, Any]] = []
    dropped: list[str] = []
    for trace in traces:
        try:
            episode = token_episode(trace, tokenizer, require_exact=tokenizer is None)
        except Skipped as why:
            detail = f" ({why.detail})" if why.detail else ""
            dropped.append(f"{trace.problem_id} sample {trace.sample}: {why.reason}{detail}")
            continue
        for sequence in episode.sequences:
            row = atropos_sample(trace, episode, sequence)
            problem = check_atropos(row, sequence.texts, decode or episode.decode)
            if problem is not None:
                dropped.append(f"{trace.problem_id} sample {trace.sample}: {problem}")
                continue
            samples.append(row)
    if not samples:
        return Group(None, dropped, len(traces))
    data: dict[str, Any] = {
        "tokens": [s["tokens"] for s in samples],
        "masks": [s["masks"] for s in samples],
        "inference_logprobs": [s["inference_logprobs"] for s in samples],
        "scores": [float(s["score"]) for s in samples],
        "messages": [s["messages"] for s in samples],
        "generation_params": {"logprobs_kinds": [s["logprobs_kind"] for s in samples]},
    }
    if len(samples) != group_size:
        data["group_overrides"] = {"group_size": len(samples)}
    return Group(data, dropped, len(traces))


def environment_failure(traces: Sequence[Trace]) -> str | None:
    """Why some episode of a group failed for a reason not the policy's, or None."""
    for trace in traces:
        if trace.error is not None and trace.error.kind in NOT_THE_MODELS:
            return f"{trace.problem_id} sample {trace.sample}: {trace.error.message}"
    return None


# ---------------------------------------------------------------- metrics


METRICS = {
    "success_rate": lambda t: float(t.success),
    "ideal_rate": lambda t: float(t.is_ideal),
    "reward": lambda t: t.reward,
    "score": lambda t: t.score,
    "failed_rate": lambda t: float(t.error is not None),
    "executions_per_episode": lambda t: float(t.metrics.executions),
    "think_count": lambda t: float(t.metrics.think_segments),
    "verify_count": lambda t: float(sum(s.kind == "verify" for s in t.steps)),
    "code_blocks": lambda t: float(t.metrics.code_blocks),
    "tool_calls": lambda t: float(t.metrics.tool_calls),
    "parse_failures": lambda t: float(t.metrics.parse_failures),
    "completion_tokens": lambda t: float(t.usage.completion_tokens),
    "prompt_tokens": lambda t: float(t.usage.prompt_tokens),
    "turns": lambda t: float(t.metrics.turns),
}
"""What each finished episode adds to the W&B means (the seed environment's success,
think and verify counts, plus executions and tokens)."""


def episode_means(traces: Iterable[Trace], prefix: str = "train/") -> dict[str, float]:
    """The mean of every `METRICS` entry over ``traces`` (empty when there are none)."""
    means = EpisodeMeans()
    for trace in traces:
        means.add(trace)
    return means.take(prefix)


class EpisodeMeans:
    """Sums of `METRICS` over the episodes finished since the last `take` (a trace is not
    kept: a long ``serve`` holds a few numbers, not its episodes)."""

    def __init__(self) -> None:
        self.count = 0
        self.sums = dict.fromkeys(METRICS, 0.0)

    def add(self, trace: Trace) -> None:
        self.count += 1
        for name, get in METRICS.items():
            self.sums[name] += get(trace)

    def take(self, prefix: str = "train/") -> dict[str, float]:
        """The means since the last call, named ``prefix + metric``; then start again."""
        if not self.count:
            return {}
        out = {f"{prefix}{name}": total / self.count for name, total in self.sums.items()}
        out[f"{prefix}episodes"] = float(self.count)
        self.__init__()  # type: ignore[misc]
        return out


# ---------------------------------------------------------------- pass@k


def pass_rates(traces: Iterable[Trace], ks: Iterable[int]) -> dict[str, float]:
    """pass@k for each k (`tracegen.views.pass_at_k`, as ``tracegen stats`` reports it),
    each problem counting the ``success`` of its samples."""
    per_problem: dict[str, list[bool]] = {}
    for trace in traces:
        per_problem.setdefault(trace.problem_id, []).append(trace.success)
    return pass_at_k(((len(s), sum(s)) for s in per_problem.values()), ks)


def eval_ks(samples: int) -> list[int]:
    """The k reported for ``samples`` samples a problem: 1, the powers of two below, and it."""
    ks = {1, samples}
    k = 2
    while k < samples:
        ks.add(k)
        k *= 2
    return sorted(ks)
