"""Output comparison: tracegen's rules against the reference graders' on the same outputs.

- LiveCodeBench (``lcb_runner/evaluation/testing_util.py``, ``grade_stdio``): strip, split
  into stripped lines, same count, each line equal or equal as `Decimal`s. The ``lines`` rule
  is that rule: on every case below both agree.
- open-r1's ``code_reward`` compares ``zip(expected_lines, actual_lines)``: a truncated
  output passes there. Here it fails (an intentional difference).
- SandboxFusion (``sandbox/utils/testing.py``) lowercases and accepts floats within
  ``rel_tol=1e-5``. Here case matters and floats need a declared tolerance (intentional).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import pytest

from tracegen.grading.compare import lines_match, outputs_match, tokens_match
from tracegen.schema import Comparison


def livecodebench_stdio(prediction: str, expected: str) -> bool:
    """LiveCodeBench's stdin verdict, restated from ``grade_stdio`` to compare against."""

    def lines(text: str) -> list[str]:
        return [line.strip() for line in text.strip().split("\n")]

    def decimals(line: str) -> list[Decimal] | None:
        try:
            return [Decimal(x) for x in line.split()]
        except InvalidOperation:
            return None

    got, want = lines(prediction), lines(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        a, b = decimals(g), decimals(w)
        if a is None or b is None or a != b:
            return False
    return True


CASES = [
    ("5\n", "5\n"),
    ("5", "5\n"),
    ("  5  \r\n\n", "5\n"),
    ("1 2\n3\n", "1 2\n3\n"),
    ("1  2\n3", "1 2\n3\n"),
    ("1 2 3\n", "1 2\n3\n"),
    ("1.0\n", "1\n"),
    ("1.00000001\n", "1\n"),
    ("YES\n", "yes\n"),
    ("4\n", "45\n"),
    ("1\n2\n", "1\n2\n3\n"),
    ("1\n2\n3\n4\n", "1\n2\n3\n"),
    ("\n", "\n"),
    ("nan\n", "nan\n"),
    ("abc def\n", "abc def\n"),
    ("1e3\n", "1000\n"),
]


@pytest.mark.parametrize(("actual", "expected"), CASES)
def test_lines_rule_agrees_with_livecodebench(actual: str, expected: str) -> None:
    assert lines_match(actual, expected) == livecodebench_stdio(actual, expected)


def test_tokens_never_accept_a_prefix_or_extra_output() -> None:
    assert tokens_match("1 2 3", "1\n2\n3\n")
    assert not tokens_match("1 2", "1 2 3")
    assert not tokens_match("1 2 3 4", "1 2 3")
    assert not tokens_match("", "0")


def test_truncated_output_fails_where_open_r1_zip_passes() -> None:
    """open-r1's code_reward: ``all(a.strip() == b.strip() for a, b in zip(expected, actual))``
    passes an output missing its last lines."""
    expected, truncated = "1\n2\n3\n", "1\n2\n"
    open_r1 = all(
        a.strip() == b.strip()
        for a, b in zip(expected.splitlines(), truncated.splitlines(), strict=False)
    )
    assert open_r1
    for rule in ("tokens", "lines", "exact"):
        assert not outputs_match(truncated, expected, Comparison(rule=rule)), rule


def test_case_matters_where_sandboxfusion_lowercases() -> None:
    assert "YES".lower() == "yes"  # SandboxFusion's comparison sees these equal
    assert not outputs_match("YES\n", "yes\n", Comparison())


def test_floats_need_a_declared_tolerance_where_sandboxfusion_uses_rel_tol() -> None:
    actual, expected = "0.3333336\n", "0.3333333\n"
    assert abs(0.3333336 - 0.3333333) <= 1e-5 * 0.3333333  # within SandboxFusion's rel_tol
    assert not outputs_match(actual, expected, Comparison())
    assert outputs_match(actual, expected, Comparison(float_tolerance=1e-6))
    assert not outputs_match("0.34\n", expected, Comparison(float_tolerance=1e-6))
    assert not outputs_match("nan\n", "1.0\n", Comparison(float_tolerance=1.0))


@pytest.mark.parametrize(
    "actual",
    [
        "٣٫٥\n",  # Arabic-Indic digits (and decimal separator)
        "٣.٥\n",  # Arabic-Indic digits, ASCII point
        "३.५\n",  # Devanagari digits
        "３.５\n",  # fullwidth digits
        "𝟑.𝟓\n",  # mathematical bold digits
    ],
)
def test_a_tolerance_compares_ascii_numerals_only(actual: str) -> None:
    """Python's float() reads other scripts' digits (``float("٣.٥") == 3.5``); a program
    that prints them has not printed the number the problem asks for."""
    assert not outputs_match(actual, "3.5\n", Comparison(float_tolerance=1e-6))
    assert not outputs_match("3.5\n", actual, Comparison(float_tolerance=1e-6))
    assert outputs_match("3.5000001\n", "3.5\n", Comparison(float_tolerance=1e-6))
