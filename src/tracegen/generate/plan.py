"""What a run will do: the order of (problem, sample) work, trace ids and sampling seeds.

Everything here is a pure function of the settings, so the same command plans the same
work, with the same ids and seeds, every time it runs.
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections.abc import Collection, Container, Iterator, Sequence
from typing import Any

from tracegen.config import GenerationSettings
from tracegen.episode.spec import Choices, EpisodeSpec, Key
from tracegen.schema import Problem, Record


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def trace_id(key: Key, settings_hash: str) -> str:
    """A short id, stable and unique per (problem, sample, mode, model, settings)."""
    return _digest(*key, settings_hash).hex()[:20]


def episode_seed(seed: int | None, problem_id: str, sample: int) -> int | None:
    """The sampling seed sent for one episode: derived from ``seed``; none without one."""
    if seed is None:
        return None
    return int.from_bytes(_digest(seed, problem_id, sample)[:4], "big") & 0x7FFFFFFF


def work_order(
    problems: Sequence[Problem], num_samples: int, seed: int | None
) -> Iterator[tuple[Problem, int]]:
    """Every (problem, sample): in problem order, or shuffled by ``seed`` when given."""
    total = len(problems) * num_samples
    if seed is None:
        order: Sequence[int] = range(total)
    else:
        shuffled = array("L", range(total))  # 8 bytes an item, not a list of int objects
        random.Random(seed).shuffle(shuffled)
        order = shuffled
    for i in order:
        yield problems[i // num_samples], i % num_samples


class PlanFingerprint(Record):
    """What makes one shard's work that of one plan: every shard's done marker and state
    file carry it, so `merge` and `status` can tell a shard of another plan."""

    problems: int
    problems_sha256: str
    num_samples: int
    settings_hash: str
    shards: int
    episodes: int
    """Episodes in this shard."""

    def differences(
        self, other: PlanFingerprint, here: str = "here", there: str = "in the run"
    ) -> list[str]:
        """What differs from ``other``'s, as a user would say it."""
        found = []
        for what, mine, theirs in (
            ("shards", self.shards, other.shards),
            ("problems", self.problems, other.problems),
        ):
            if mine != theirs:
                found.append(f"{mine} {what} {here}, {theirs} {there}")
        if self.problems == other.problems and self.problems_sha256 != other.problems_sha256:
            found.append("the problems differ")
        if self.num_samples != other.num_samples:
            found.append(f"num-samples {self.num_samples} {here}, {other.num_samples} {there}")
        if self.settings_hash != other.settings_hash:
            found.append(
                f"settings hash {self.settings_hash} {here}, {other.settings_hash} {there}"
            )
        if not found and self.episodes != other.episodes:
            found.append(f"{self.episodes} episodes {here}, {other.episodes} {there}")
        return found


class Plan:
    """Every episode of a run, as `EpisodeSpec`s made lazily in work order."""

    def __init__(
        self,
        problems: Sequence[Problem],
        settings: GenerationSettings,
        system_prompt: str,
        num_samples: int,
        seed: int | None,
        choices: Choices | None = None,
    ) -> None:
        self.problems = problems
        self.settings = settings
        self.system_prompt = system_prompt
        self.num_samples = num_samples
        self.seed = seed
        self.choices = choices or Choices()
        self.settings_hash = settings.digest(system_prompt, constrained=self.choices.constrain)

    def record(self) -> dict[str, Any]:
        """What the run's state file records of the settings (what the hash covers)."""
        return self.settings.record(self.system_prompt, constrained=self.choices.constrain)

    @property
    def size(self) -> int:
        return len(self.problems) * self.num_samples

    def key(self, problem: Problem, sample: int) -> Key:
        return (problem.id, sample, self.settings.mode, self.settings.model)

    def count(self, done: Container[Key]) -> int:
        """How many episodes are not in ``done``."""
        return sum(
            self.key(p, s) not in done
            for p, s in work_order(self.problems, self.num_samples, self.seed)
        )

    def within(self, keys: Collection[Key]) -> set[Key]:
        """Those of ``keys`` that are episodes of this plan."""
        if not keys:
            return set()
        found = (self.key(p, s) for p, s in work_order(self.problems, self.num_samples, self.seed))
        return {key for key in found if key in keys}

    def spec(self, problem: Problem, sample: int) -> EpisodeSpec:
        """Sample ``sample`` of ``problem``."""
        return EpisodeSpec(
            problem=problem,
            sample=sample,
            trace_id=trace_id(self.key(problem, sample), self.settings_hash),
            settings=self.settings,
            settings_hash=self.settings_hash,
            system_prompt=self.system_prompt,
            seed=episode_seed(self.seed, problem.id, sample),
            choices=self.choices,
        )

    def specs(self, done: Container[Key]) -> Iterator[EpisodeSpec]:
        """The episodes not in ``done`` (checked as each is taken), in work order."""
        for problem, sample in work_order(self.problems, self.num_samples, self.seed):
            if self.key(problem, sample) not in done:
                yield self.spec(problem, sample)
