"""GRPO on episodes generated beforehand: the records of ``tracegen convert --rl trl`` served
to ``GRPOTrainer`` through its ``rollout_func``.

TRL's contract (``GRPOTrainer._generate``, trl 1.16.0): ``rollout_func(prompts, trainer)``
returns ``prompt_ids``, ``completion_ids`` and ``logprobs`` per prompt; ``env_mask`` becomes
the trainer's ``tool_mask`` (0 on what tracegen wrote: results, tool responses); every other
key goes to the reward functions. The dataset here holds one row per problem whose
``prompt`` is the problem id; the trainer repeats it ``num_generations`` times and each
repetition is served another recorded episode of the problem, in file order, round after
round. A record is never repeated within a group: a problem with fewer records than the group
asks for is refused by name (a group of copies has no advantage to learn from); give
``group_size`` (the trainer's ``num_generations``) to leave such problems out of the dataset
(`lacking`, `describe`). A record without logprobs (its backend returned none for some sampled
token) cannot be served: TRL would fail on it; such records are left out and counted
(``skipped``). Every label of a record (its error, its logprobs' kind, its turn) goes to the
reward functions.

This is off-policy: the episodes were sampled by whatever model wrote them, not by the
policy being trained. In TRL 1.16 the importance-sampling correction against the recorded
logprobs (``vllm_importance_sampling_correction``) is applied only when generation uses vLLM
(``use_vllm=True``); with a ``rollout_func`` and no vLLM the recorded logprobs are not used to
reweigh anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracegen.errors import InputFileError
from tracegen.jsonl import iter_lines

if TYPE_CHECKING:
    from datasets import Dataset

SERVED = ("prompt_ids", "completion_ids", "logprobs", "env_mask")
FORWARDED = (
    "reward",
    "score",
    "success",
    "problem_id",
    "id",
    "sample",
    "mode",
    "model",
    "turn",
    "token_source",
    "error_kind",
    "error_reason",
    "logprobs_kind",
)
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
    reward function giving each record's recorded reward. With ``group_size``, problems with
    fewer records than that are left out (`lacking`)."""

    def __init__(self, path: str | Path, group_size: int | None = None) -> None:
        path = Path(path)
        if not path.exists():
            raise InputFileError(f"{path}: no such file")
        self.group_size = group_size
        self.by_problem: dict[str, list[dict[str, Any]]] = {}
        self.skipped = 0
        for row in _records(path):
            missing = [k for k in (*SERVED, "problem_id") if k not in row]
            if missing:
                raise InputFileError(
                    f"{path}: a record without {missing[0]!r}: not `convert --rl trl` output"
                )
            records = self.by_problem.setdefault(row["problem_id"], [])
            if row["logprobs"] is None:
                self.skipped += 1
                continue
            records.append(row)
        least = group_size or 1
        self.lacking: dict[str, int] = {
            p: len(rows) for p, rows in self.by_problem.items() if len(rows) < least
        }
        """Problems left out, with the number of records they have (fewer than a group)."""
        for p in self.lacking:
            del self.by_problem[p]
        if not self.by_problem:
            if group_size is None:
                raise InputFileError(f"{path}: no record with logprobs to serve")
            raise InputFileError(
                f"{path}: no problem has {group_size} records with logprobs to fill a group "
                f"({_listing(self.lacking)}); generate more samples per problem "
                "(run --num-samples) or lower num_generations"
            )
        self._served = dict.fromkeys(self.by_problem, 0)

    def describe(self) -> str:
        """What is served, and what is left out and why."""
        records = sum(map(len, self.by_problem.values()))
        text = f"{records} records of {len(self.by_problem)} problems"
        if self.lacking:
            n = len(self.lacking)
            text += (
                f"; {n} problem{'s' if n > 1 else ''} with fewer than {self.group_size} "
                f"records left out: {_listing(self.lacking)}"
            )
        if self.skipped:
            text += f"; {self.skipped} records without logprobs left out"
        return text

    def dataset(self) -> Dataset:
        """One row per problem served, its ``prompt`` the problem id."""
        from datasets import Dataset

        return Dataset.from_dict({"prompt": list(self.by_problem)})

    def take(self, problem_id: str, n: int) -> list[dict[str, Any]]:
        """The problem's next ``n`` records, all different, cycling through them in file
        order round after round."""
        try:
            records = self.by_problem[problem_id]
        except KeyError:
            raise KeyError(f"no record of problem {problem_id!r}") from None
        if n > len(records):
            raise ValueError(
                f"problem {problem_id!r} has {len(records)} records with logprobs, and a "
                f"group of {n} asks for more: a record is never repeated within a group "
                "(give group_size=num_generations to leave such problems out)"
            )
        start = self._served[problem_id]
        self._served[problem_id] = start + n
        return [records[(start + i) % len(records)] for i in range(n)]

    def __call__(self, prompts: Sequence[Any], trainer: Any = None) -> dict[str, list[Any]]:
        names = [str(p) for p in prompts]
        taken = {p: iter(self.take(p, n)) for p, n in Counter(names).items()}
        records = [next(taken[p]) for p in names]
        return {key: [r.get(key) for r in records] for key in (*SERVED, *FORWARDED)}

    @staticmethod
    def reward(
        prompts: Any, completions: Any, reward: Sequence[float], **kwargs: Any
    ) -> list[float]:
        """Each served record's reward (tracegen's, as recorded)."""
        return [float(r) for r in reward]


def _listing(counts: dict[str, int]) -> str:
    shown = ", ".join(f"{p} ({n})" for p, n in list(counts.items())[:10])
    return shown + (f" and {len(counts) - 10} more" if len(counts) > 10 else "")
