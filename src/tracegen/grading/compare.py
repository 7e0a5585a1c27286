"""Output comparison rules for program tests (`tracegen.schema.Comparison`).

None of them accepts a prefix of the expected output: every token (or line) must be there,
and nothing more. Where the reference graders differ:

- open-r1's ``code_reward`` zips the expected and actual lines, so truncated output passes:
  here it fails.
- SandboxFusion lowercases both outputs and takes floats within ``rel_tol=1e-5``: here
  letters keep their case (``YES`` is not ``yes``) and floats are compared only when the
  problem declares a tolerance.
- LiveCodeBench's rule is ``lines`` (`lines_match`), the same as its grader.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from tracegen.schema import Comparison

_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
"""A number as the tolerance reads it: ASCII digits only (``float`` also reads ``٣.٥``)."""


def _close(got: str, want: str, tolerance: float) -> bool:
    if not (_NUMBER.fullmatch(got) and _NUMBER.fullmatch(want)):
        return False
    a, b = float(got), float(want)
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def tokens_match(actual: str, expected: str, tolerance: float | None = None) -> bool:
    """Whitespace-separated tokens all equal (numbers within ``tolerance``, absolute or
    relative, when given); as many tokens on each side."""
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    if tolerance is None:
        return got == want
    return all(g == w or _close(g, w, tolerance) for g, w in zip(got, want, strict=True))


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except InvalidOperation:
        return None


def lines_match(actual: str, expected: str) -> bool:
    """LiveCodeBench's rule (``lcb_runner/evaluation/testing_util.py``, ``grade_stdio``):
    both stripped and split into stripped lines; as many lines on each side; each line equal
    as text, or its whitespace-separated tokens equal as `Decimal` (``1.0`` is ``1``)."""
    got, want = _stripped_lines(actual), _stripped_lines(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        a, b = _decimals(g), _decimals(w)
        if a is None or b is None or a != b:
            return False
    return True


def outputs_match(actual: str, expected: str, rule: Comparison) -> bool:
    """Whether ``actual`` is right by ``rule`` (not ``checker``: the judge runs that)."""
    if rule.rule == "tokens":
        return tokens_match(actual, expected, rule.float_tolerance)
    if rule.rule == "lines":
        return lines_match(actual, expected)
    if rule.rule == "exact":
        return actual == expected
    raise ValueError(f"the {rule.rule!r} rule is decided by running a program")
