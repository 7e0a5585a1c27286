"""Work order, trace ids and seeds are pure functions of the settings."""

from __future__ import annotations

from tracegen.generate.plan import episode_seed, trace_id, work_order
from tracegen.schema import Problem, TestCase


def problems(n: int) -> list[Problem]:
    test = TestCase(name="t", kind="io", args=[1], expected=1)
    return [Problem(id=f"p{i}", prompt="x", entry_point="f", tests=[test]) for i in range(n)]


def order(items: list[tuple[Problem, int]]) -> list[tuple[str, int]]:
    return [(p.id, s) for p, s in items]


def test_without_a_seed_work_follows_problem_order():
    assert order(list(work_order(problems(2), 2, None))) == [
        ("p0", 0),
        ("p0", 1),
        ("p1", 0),
        ("p1", 1),
    ]


def test_a_seed_shuffles_every_pair_the_same_way_each_time():
    first = order(list(work_order(problems(10), 3, 7)))
    assert first == order(list(work_order(problems(10), 3, 7)))
    assert first != order(list(work_order(problems(10), 3, None)))
    assert first != order(list(work_order(problems(10), 3, 8)))
    assert sorted(first) == sorted(order(list(work_order(problems(10), 3, None))))


def test_episode_seeds_are_stable_distinct_and_absent_without_a_seed():
    seeds = {episode_seed(1, f"p{i}", s) for i in range(50) for s in range(4)}
    assert len(seeds) == 200
    assert episode_seed(1, "p3", 2) == episode_seed(1, "p3", 2)
    assert all(0 <= s < 2**31 for s in seeds)
    assert episode_seed(None, "p3", 2) is None


def test_trace_ids_differ_by_sample_and_settings():
    key = ("p0", 0, "markers", "m")
    assert trace_id(key, "h1") == trace_id(key, "h1")
    assert trace_id(key, "h1") != trace_id(("p0", 1, "markers", "m"), "h1")
    assert trace_id(key, "h1") != trace_id(key, "h2")
