"""The shipped problem set: classics with ordinary and adversarial tests, all solvable."""

from __future__ import annotations

import pytest

from tracegen.problems import load_problems
from tracegen.sandbox import Sandbox
from tracegen.schema import Problem

BUILTIN = load_problems("builtin")
CLASSICS = [
    "two_sum",
    "is_palindrome",
    "max_subarray",
    "valid_parentheses",
    "merge_sorted_lists",
    "climbing_stairs",
    "binary_search",
    "reverse_string",
    "fizzbuzz",
    "longest_common_prefix",
    "roman_to_int",
    "group_anagrams",
    "rotate_matrix",
    "merge_intervals",
]


def test_builtin_set_has_the_classics_each_with_many_tests_and_a_reference() -> None:
    assert len(BUILTIN) >= 20
    assert set(CLASSICS) <= {p.id for p in BUILTIN}
    for p in BUILTIN:
        assert p.kind == "code" and p.entry_point and p.reference_solution
        assert len(p.tests) >= 5, p.id
        assert sum(t.kind == "io" for t in p.tests) >= len(p.tests) / 2, p.id


@pytest.mark.slow
async def test_every_builtin_reference_solution_passes_its_tests() -> None:
    async with Sandbox() as sandbox:
        for p in BUILTIN:
            result = await sandbox.run_tests(p.reference_solution or "", p)
            failures = [t for t in result.tests if not t.passed]
            assert result.status == "ok", (p.id, result.error, failures)
            assert result.passed == result.total == len(p.tests)


def _problem(pid: str) -> Problem:
    return next(p for p in BUILTIN if p.id == pid)


NAIVE = [
    (
        "two_sum",
        "def two_sum(nums, target):\n    index = {x: i for i, x in enumerate(nums)}\n"
        "    for i, x in enumerate(nums):\n        if target - x in index:\n"
        "            return sorted([i, index[target - x]])\n",
        "no_reuse",
    ),
    ("is_palindrome", "def is_palindrome(s):\n    return s == s[::-1]\n", "classic"),
    (
        "is_palindrome",
        "def is_palindrome(s):\n    t = ''.join(c for c in s if c.isalnum())\n"
        "    return t == t[::-1]\n",
        "mixed_case",
    ),
    (
        "max_subarray",
        "def max_subarray(nums):\n    best = cur = 0\n    for x in nums:\n"
        "        cur = max(0, cur + x)\n        best = max(best, cur)\n    return best\n",
        "all_negative",
    ),
    (
        "valid_parentheses",
        "def valid_parentheses(s):\n    return s.count('(') == s.count(')')"
        " and s.count('[') == s.count(']') and s.count('{') == s.count('}')\n",
        "interleaved",
    ),
    (
        "climbing_stairs",
        "def climbing_stairs(n):\n    a, b = 1, 1\n    for _ in range(n):\n"
        "        a, b = b, a + b\n    return a if n > 0 else 0\n",
        "zero",
    ),
    (
        "longest_common_prefix",
        "def longest_common_prefix(strs):\n    import os\n"
        "    return os.path.commonprefix(strs) if len(strs) > 1 else ''\n",
        "one_string",
    ),
    (
        "merge_intervals",
        "def merge_intervals(intervals):\n    out = []\n    for s, e in intervals:\n"
        "        if out and s < out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n"
        "        else:\n            out.append([s, e])\n    return out\n",
        "touching",
    ),
    ("int_sqrt", "def int_sqrt(x):\n    return int(x ** 0.5)\n", "float_trap"),
    (
        "flatten",
        "def flatten(nested):\n    out = []\n    for x in nested:\n"
        "        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out\n",
        "very_deep",
    ),
]


@pytest.mark.parametrize(
    ("pid", "code", "caught_by"), NAIVE, ids=[n[0] + "-" + n[2] for n in NAIVE]
)
async def test_adversarial_tests_catch_common_mistakes(pid: str, code: str, caught_by: str) -> None:
    async with Sandbox() as sandbox:
        result = await sandbox.run_tests(code, _problem(pid))
    assert result.status == "failed"
    assert caught_by in {t.name for t in result.tests if not t.passed}


STARTER = load_problems("starter")


def test_starter_set_is_small_with_a_reference_for_each() -> None:
    assert 3 <= len(STARTER) <= 8
    for p in STARTER:
        assert p.kind == "code" and p.entry_point and p.reference_solution
        assert len(p.tests) >= 4, p.id


async def test_every_starter_reference_solution_passes_its_tests() -> None:
    async with Sandbox() as sandbox:
        for p in STARTER:
            result = await sandbox.run_tests(p.reference_solution or "", p)
            assert result.status == "ok" and result.passed == result.total, (p.id, result)
