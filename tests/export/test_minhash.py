"""MinHash signatures and the LSH index that `dedup` finds near-duplicates with."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tracegen.export.minhash import NUM_PERM, Index, bands_for, signature, similarity


def shingles(n: int, start: int = 0) -> set[str]:
    return {f"token{i}" for i in range(start, start + n)}


def test_a_signature_has_one_value_per_permutation_and_is_stable() -> None:
    items = shingles(50)
    first = signature(items)
    assert first.shape == (NUM_PERM,) and first.dtype == np.uint32
    assert np.array_equal(first, signature(set(sorted(items, reverse=True))))


def test_equal_sets_are_fully_similar_and_disjoint_ones_hardly() -> None:
    assert similarity(signature(shingles(80)), signature(shingles(80))) == 1.0
    assert similarity(signature(shingles(80)), signature(shingles(80, start=1000))) < 0.1


@pytest.mark.parametrize("overlap", [0.2, 0.5, 0.8])
def test_similarity_estimates_the_jaccard_index(overlap: float) -> None:
    n = 400
    shared = int(n * overlap)
    a = shingles(n)
    b = shingles(shared) | shingles(n - shared, start=10_000)
    jaccard = len(a & b) / len(a | b)
    assert abs(similarity(signature(a), signature(b)) - jaccard) < 0.12


def test_bands_fit_the_signature_and_a_higher_threshold_asks_for_more_rows() -> None:
    for threshold in (0.5, 0.7, 0.9):
        bands, rows = bands_for(threshold)
        assert bands * rows <= NUM_PERM
    assert bands_for(0.9)[1] > bands_for(0.5)[1]


def test_the_index_finds_near_duplicates_and_not_strangers() -> None:
    index = Index(threshold=0.7)
    base = shingles(200)
    index.add(0, signature(base))
    index.add(1, signature(shingles(200, start=5000)))
    near = set(list(sorted(base))[:190]) | {"other1", "other2"}
    found = index.similar(signature(near))
    assert set(found) == {0} and found[0] >= 0.7


def test_the_index_keeps_every_item_of_a_crowded_bucket() -> None:
    index = Index(threshold=0.8)
    same = signature(shingles(30))
    for i in range(5):
        index.add(i, same)
    assert set(index.similar(same)) == {0, 1, 2, 3, 4}
    assert np.array_equal(index.signature(3), same)


def test_recall_at_the_threshold_is_high() -> None:
    rng = random.Random(3)
    index = Index(threshold=0.8)
    base = sorted(shingles(300))
    kept = []
    for i in range(40):
        variant = set(base)
        for item in rng.sample(base, 15):  # about 0.9 similar to the base
            variant.discard(item)
            variant.add(f"{item}-changed{i}")
        kept.append(variant)
        index.add(i, signature(variant))
    hits = index.similar(signature(set(base)))
    assert len(hits) >= 36
