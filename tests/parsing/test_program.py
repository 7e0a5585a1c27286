"""The final program the modes score: code blocks joined, redefinitions replacing, and when a
program is complete enough to run."""

from __future__ import annotations

import pytest

from tracegen.parsing.program import Program, is_complete


def test_code_blocks_join_and_a_redefinition_replaces_what_followed_the_old_one() -> None:
    program = Program()
    for block in ["import math", "def f(x):", "    return x - 1", "def g():\n    return 1"]:
        program.add(block)
    program.add("\ndef f(x):\n    return x + 1\n")
    assert program.text == "import math\ndef f(x):\n    return x + 1\n"


@pytest.mark.parametrize(
    ("code", "entry", "complete"),
    [
        ("def f(x):\n    return x", "f", True),
        ("def f(x):\n    total = 0", "f", False),
        ("def f(x):\n    return (x", "f", False),
        ("def g(x):\n    return x", "f", False),
        ("x = 9 * 2\nprint(x)", None, True),
        ("x = 9 * 2", None, False),
    ],
)
def test_a_program_is_complete_when_it_parses_and_returns_from_the_entry_point(
    code: str, entry: str | None, complete: bool
) -> None:
    assert is_complete(code, entry) is complete


def test_a_whole_program_is_complete_once_it_can_run() -> None:
    """Program problems: a C++ program with ``main`` and its braces closed, a Python one that
    reads or prints, a LeetCode class whose method returns."""
    from tracegen.parsing.program import is_complete

    assert is_complete('#include <cstdio>\nint main(){ puts("5"); }\n', None)
    assert not is_complete("#include <cstdio>\nint main(){ if (1) {\n", None)
    assert is_complete("a, b = map(int, input().split())\nprint(a + b)\n", None)
    solution = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    assert is_complete(solution, "Solution.twoSum")
    assert not is_complete(solution, "Solution.threeSum")
