"""Final answers of math problems (GSM8K): extract one from model text, compare by value."""

from __future__ import annotations

import math
import re
import threading
from fractions import Fraction

from tracegen.schema import ExecResult, Problem, TestResult

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+"
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

    A percent sign is dropped (``50%`` is 50), as GSM8K answers are written.
    """
    s = _unwrap(text).replace(",", "").replace(" ", "").replace("$", "").rstrip(".")
    s = s.removesuffix("%")
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
    return a == b or math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=1e-9)


def _as_latex(text: str) -> str:
    """math-verify reads LaTeX only between delimiters: wrap a bare ``\\sqrt{4}``."""
    return f"${text}$" if "\\" in text and "$" not in text else text


def _math_verify_match(predicted: str, expected: str) -> bool | None:
    """math-verify's verdict, or None when the `math` extra is not installed."""
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    # math-verify times out with SIGALRM, which only the main thread may use.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(_as_latex(expected), parsing_timeout=timeout)
    target = parse(_as_latex(predicted), parsing_timeout=timeout)
    if not gold or not target:
        return None
    return verify(gold, target, timeout_seconds=timeout)


def answers_match(predicted: str, expected: str) -> bool:
    """Whether a final answer equals the expected one by value (math-verify when installed)."""
    if _numbers_match(predicted, expected):
        return True
    verdict = _math_verify_match(predicted, expected)
    return bool(verdict)


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
