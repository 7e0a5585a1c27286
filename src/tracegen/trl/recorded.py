"""GRPO on episodes generated beforehand: the records of ``tracegen convert --rl trl`` served
to ``GRPOTrainer`` through its ``rollout_func``.

TRL's contract (``GRPOTrainer._generate``, trl 1.16.0): ``rollout_func(prompts, trainer)``
returns ``prompt_ids``, ``completion_ids`` and ``logprobs`` per prompt; ``env_mask`` becomes
the trainer's ``tool_mask`` (0 on what tracegen wrote: results, tool responses); every other
key goes to the reward functions. The dataset here holds one row per problem whose
``prompt`` is the problem id; the trainer repeats it ``num_generations`` times and each
repetition is served the problem's next recorded episode, in file order, round after round.
A record without logprobs (its backend returned none for some sampled token) cannot be
served: TRL would fail on it; such records are left out and counted (``skipped``).

This is off-policy: the episodes were sampled by whatever model wrote them, not by the
policy being trained. TRL's importance-sampling correction weighs them by the recorded
logprobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracegen.errors import InputFileError
from tracegen.jsonl import iter_lines

if TYPE_CHECKING:
    from datasets import Dataset

SERVED = ("prompt_ids", "completion_ids", "logprobs", "env_mask")
FORWARDED = ("reward", "score", "success", "problem_id", "id", "sample")
"""Record fields passed on to the reward functions, beside what TRL trains on."""


def _records(path: Path) -> Iterator[dict[str, Any]]:
    if path.is_dir() or path.suffix == ".parquet":
        from datasets import Dataset, load_from_disk

        data = load_from_disk(str(path)) if path.is_dir() else Dataset.from_parquet(str(path))
        yield from data
        return
    for _, row in iter_lines(path):
        yield row


class RecordedRollouts:
    """A ``rollout_func`` serving the records at ``path`` (JSONL, Parquet or a saved dataset
    of ``convert --rl trl``); `dataset` is the train dataset to pair it with, `reward` the
    reward function giving each record's recorded reward."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.exists():
            raise InputFileError(f"{path}: no such file")
        self.by_problem: dict[str, list[dict[str, Any]]] = {}
        self.skipped = 0
        for row in _records(path):
            missing = [k for k in (*SERVED, "problem_id") if k not in row]
            if missing:
                raise InputFileError(
                    f"{path}: a record without {missing[0]!r}: not `convert --rl trl` output"
                )
            if row["logprobs"] is None:
                self.skipped += 1
                continue
            self.by_problem.setdefault(row["problem_id"], []).append(row)
        if not self.by_problem:
            raise InputFileError(f"{path}: no record with logprobs to serve")
        self._turns = {p: count() for p in self.by_problem}

    def dataset(self) -> Dataset:
        """One row per problem, its ``prompt`` the problem id."""
        from datasets import Dataset

        return Dataset.from_dict({"prompt": list(self.by_problem)})

    def take(self, problem_id: str) -> dict[str, Any]:
        """The problem's next record, cycling through them in file order."""
        try:
            records = self.by_problem[problem_id]
        except KeyError:
            raise KeyError(f"no record of problem {problem_id!r}") from None
        return records[next(self._turns[problem_id]) % len(records)]

    def __call__(self, prompts: Sequence[Any], trainer: Any = None) -> dict[str, list[Any]]:
        records = [self.take(str(p)) for p in prompts]
        return {key: [r.get(key) for r in records] for key in (*SERVED, *FORWARDED)}

    @staticmethod
    def reward(
        prompts: Any, completions: Any, reward: Sequence[float], **kwargs: Any
    ) -> list[float]:
        """Each served record's reward (tracegen's, as recorded)."""
        return [float(r) for r in reward]
