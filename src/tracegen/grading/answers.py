"""Final answers of math problems (GSM8K): extract one from model text, compare by value."""

from __future__ import annotations

import importlib.util
import math
import re
from fractions import Fraction

from tracegen.grading.mathverify import math_verify
from tracegen.schema import ExecResult, Problem, TestResult

_NUMBER = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:/\d+)?|-?\.\d+"
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_HASHES = re.compile(r"####\s*\$?\s*(" + _NUMBER + ")")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:|=)\s*(?:\*\*)?\s*\$?\s*(" + _NUMBER + ")", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)
_REL_TOL = 1e-6


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), nested braces allowed."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def extract_final_answer(text: str) -> str | None:
    """The final answer in ``text``: last ``\\boxed{}``, ``#### N``, "answer is N", last number."""
    boxed = _last_boxed(text)
    if boxed:
        return boxed
    for pattern in (_HASHES, _ANSWER_IS, _ANY_NUMBER):
        found = pattern.findall(text)
        if found:
            return found[-1].rstrip(".")
    return None


def _unwrap(text: str) -> str:
    text = text.strip().strip("$").strip()
    boxed = _last_boxed(text)
    if boxed is not None:
        text = boxed
    text = re.sub(r"\\(?:text|mathrm)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\[d]?frac\{([^}]*)\}\{([^}]*)\}", r"\1/\2", text)
    return text.replace("\\$", "").replace("\\%", "%").replace("\\,", "").replace("\\!", "")


def parse_number(text: str) -> Fraction | None:
    """``"$1,234.50"``, ``"50%"``, ``"3/4"``, ``"18.0"``, ``"\\frac{3}{4}"`` → a number; else None.

    A percent sign is dropped (``50%`` is 50), as GSM8K answers are written. A comma is read
    only as a thousands separator (``1,234``): ``2,2`` or ``4,5,6,7`` are not numbers.
    """
    s = _unwrap(text).replace(" ", "").replace("$", "").rstrip(".")
    s = s.removesuffix("%")
    if "," in s:
        if not _THOUSANDS.fullmatch(s):
            return None
        s = s.replace(",", "")
    if not s:
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def _numbers_match(predicted: str, expected: str) -> bool:
    a, b = parse_number(predicted), parse_number(expected)
    if a is None or b is None:
        return _unwrap(predicted).casefold() == _unwrap(expected).casefold()
    if b.denominator == 1:  # a whole number: 10000005 is not 10000000
        return a == b
    return a == b or math.isclose(a, b, rel_tol=_REL_TOL)


def _as_latex(text: str) -> str:
    """math-verify reads LaTeX only between delimiters: wrap a bare ``\\sqrt{4}`` or
    ``x^2+2x+1`` (an answer already extracted from its text)."""
    return text if "$" in text or "\\boxed" in text else f"${text}$"


def math_verify_installed() -> bool:
    """Whether the `math` extra (``math-verify``) is installed (found, not imported here:
    it runs in its worker process)."""
    return importlib.util.find_spec("math_verify") is not None


def _math_verify_match(predicted: str, expected: str) -> bool | None:
    """math-verify's verdict (gold first, bounded in time from any thread), or None when
    the `math` extra is not installed or it cannot decide."""
    if not math_verify_installed():
        return None
    return math_verify(_as_latex(expected), _as_latex(predicted))


def answers_match(predicted: str, expected: str) -> bool:
    """Whether a final answer equals the expected one by value: two numbers are compared
    as numbers; anything else (LaTeX, expressions, intervals, sets) by math-verify when
    installed, else as text."""
    a, b = parse_number(predicted), parse_number(expected)
    if a is not None and b is not None:
        return _numbers_match(predicted, expected)
    verdict = _math_verify_match(predicted, expected)
    if verdict is None:
        return _unwrap(predicted).casefold() == _unwrap(expected).casefold()
    return verdict


def grade_answer(problem: Problem, answer: str | None) -> ExecResult:
    """A math problem's verdict: its final answer compared by number with each answer test."""
    results = [
        TestResult(
            name=t.name,
            passed=answer is not None and answers_match(answer, str(t.expected)),
            expected=str(t.expected),
            actual=answer,
        )
        for t in problem.tests
    ]
    return ExecResult(status="ok" if all(r.passed for r in results) else "failed", tests=results)
