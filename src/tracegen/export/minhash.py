"""MinHash signatures and an LSH index over them, on numpy.

A signature holds, for each of `NUM_PERM` random permutations, the smallest permuted 32-bit
hash of a set's items; the share of equal positions in two signatures estimates the sets'
Jaccard similarity. Items are hashed with CRC-32 (not Python's ``hash``, which changes from
one process to the next), so the same file gives the same signatures, and ``dedup`` the same
result, in every run. The index splits signatures into bands (chosen for the threshold,
favouring recall) and offers as candidates the items that agree on every row of some band.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

NUM_PERM = 128
_MERSENNE = np.uint64((1 << 61) - 1)
_MAX_HASH = np.uint64((1 << 32) - 1)
_PERMUTATIONS = np.random.RandomState(1).randint(
    1, (1 << 61) - 1, size=(2, NUM_PERM), dtype=np.uint64
)


def signature(items: set[str]) -> np.ndarray:
    """The MinHash signature of a set: for each of `NUM_PERM` permutations, the smallest
    permuted 32-bit hash of its items."""
    hashes = np.fromiter((zlib.crc32(i.encode()) for i in items), dtype=np.uint64, count=len(items))
    a, b = _PERMUTATIONS
    permuted = (hashes[:, None] * a + b) % _MERSENNE & _MAX_HASH
    return permuted.min(axis=0).astype(np.uint32)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The Jaccard similarity two signatures estimate."""
    return float(np.count_nonzero(a == b)) / NUM_PERM


def bands_for(threshold: float) -> tuple[int, int]:
    """LSH bands and rows (b·r ≤ `NUM_PERM`) for ``threshold``, weighing missed pairs 9 times
    more than false candidates, which are checked anyway."""
    s = np.linspace(0.0, 1.0, 401)
    best: tuple[float, int, int] = (float("inf"), 1, NUM_PERM)
    for rows in range(1, NUM_PERM + 1):
        for bands in range(1, NUM_PERM // rows + 1):
            p = 1 - (1 - s**rows) ** bands
            false_pos = np.trapezoid(np.where(s < threshold, p, 0), s)
            false_neg = np.trapezoid(np.where(s >= threshold, 1 - p, 0), s)
            cost = float(0.1 * false_pos + 0.9 * false_neg)
            if cost < best[0]:
                best = (cost, bands, rows)
    return best[1], best[2]


@dataclass
class Index:
    """LSH over signatures: items that agree on every row of some band are candidates."""

    threshold: float
    bands: int = 0
    rows: int = 0
    buckets: list[dict[int, int | list[int]]] = field(default_factory=list)
    signatures: dict[int, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bands, self.rows = bands_for(self.threshold)
        self.buckets = [{} for _ in range(self.bands)]

    def _keys(self, sig: np.ndarray) -> list[int]:
        r = self.rows
        return [hash(sig[i * r : (i + 1) * r].tobytes()) for i in range(self.bands)]

    def similar(self, sig: np.ndarray) -> dict[int, float]:
        """The items indexed so far whose similarity to ``sig`` reaches the threshold."""
        found: dict[int, float] = {}
        for bucket, key in zip(self.buckets, self._keys(sig), strict=True):
            hit = bucket.get(key)
            for other in [hit] if isinstance(hit, int) else hit or []:
                if other not in found:
                    found[other] = similarity(sig, self.signature(other))
        return {i: v for i, v in found.items() if v >= self.threshold}

    def add(self, index: int, sig: np.ndarray) -> None:
        self.signatures[index] = sig.tobytes()
        for bucket, key in zip(self.buckets, self._keys(sig), strict=True):
            hit = bucket.get(key)
            if hit is None:
                bucket[key] = index
            elif isinstance(hit, int):
                bucket[key] = [hit, index]
            else:
                hit.append(index)

    def signature(self, index: int) -> np.ndarray:
        return np.frombuffer(self.signatures[index], dtype=np.uint32)
