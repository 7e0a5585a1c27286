"""What a run will do: the order of (problem, sample) work, trace ids and sampling seeds.

Everything here is a pure function of the settings, so the same command plans the same
work, with the same ids and seeds, every time it runs.
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections.abc import Iterator, Sequence

from tracegen.schema import Problem

Key = tuple[str, int, str, str]


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
