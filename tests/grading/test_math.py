"""GSM8K final answers: extraction from model text and comparison by value."""

from __future__ import annotations

import importlib.util
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tracegen.grading.answers import answers_match, extract_final_answer


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so x = 3, and the total is \\boxed{18}. Check: 4 + 5 = 9", "18"),
        ("first \\boxed{1}, corrected: \\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
        ("9 * 2 = 18\n#### 1,234", "1,234"),
        ("She earns 9 eggs * $2. The answer is $18.", "18"),
        ("Final answer: **42**", "42"),
        ("3 apples plus 4 pears make 7.", "7"),
        ("the temperature drops to -3.5 degrees", "-3.5"),
        ("no number here", None),
    ],
)
def test_final_answer_is_extracted_by_priority(text: str, answer: str | None) -> None:
    assert extract_final_answer(text) == answer


MATCHING = [
    ("1,000", "1000"),
    ("$18.00", "18"),
    ("18.0", "18"),
    ("50%", "50"),
    ("3/4", "0.75"),
    ("\\frac{3}{4}", "0.75"),
    ("\\boxed{72}", "72"),
    ("-5", "-5.0"),
]
DIFFERENT = [
    ("2,2", "22"),  # a comma is a thousands separator only
    ("4,5,6,7", "4567"),
    ("17", "18"),
    ("18", "180"),
    ("-18", "18"),
    ("1/3", "0.3"),
    ("", "18"),
    ("10000005", "10000000"),  # within a relative 1e-6, but a whole number is exact
    ("84.0000001", "84"),
    ("0", "1/3000000000"),  # a tiny expected value is not zero (no absolute tolerance)
    ("0", "\\frac{1}{2000000000}"),
]


@pytest.mark.parametrize(("predicted", "expected"), MATCHING)
def test_equal_values_written_differently_match(predicted: str, expected: str) -> None:
    assert answers_match(predicted, expected)


@pytest.mark.parametrize(("predicted", "expected"), DIFFERENT)
def test_different_values_do_not_match(predicted: str, expected: str) -> None:
    assert not answers_match(predicted, expected)


def test_math_verify_accepts_expressions_numbers_cannot_read() -> None:
    assert answers_match("2^3", "8")
    assert answers_match("\\sqrt{4}", "2")


@pytest.fixture
def without_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def no_math_verify(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "math_verify" or name.startswith("math_verify."):
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", no_math_verify)


@pytest.mark.parametrize(("predicted", "expected"), MATCHING)
def test_numeric_fallback_matches_without_math_extra(
    without_math_verify: None, predicted: str, expected: str
) -> None:
    assert answers_match(predicted, expected)


@pytest.mark.parametrize(("predicted", "expected"), DIFFERENT)
def test_numeric_fallback_rejects_different_values(
    without_math_verify: None, predicted: str, expected: str
) -> None:
    assert not answers_match(predicted, expected)


def test_fallback_compares_non_numbers_as_text(without_math_verify: None) -> None:
    assert not answers_match("2^3", "8")
    assert answers_match("Yes", "yes")


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [
        ("\\frac{3}{4}", "0.75"),
        ("\\sqrt{12}", "2\\sqrt{3}"),
        ("(x+1)^2", "x^2+2x+1"),
        ("\\{3, 1, 2\\}", "\\{1, 2, 3\\}"),
        ("3 + 4i", "4i + 3"),
        ("[0, 1)", "[0, 1)"),
        ("\\boxed{\\dfrac{1}{2}}", "\\frac12"),
    ],
)
def test_math_verify_accepts_latex_answers(predicted: str, expected: str) -> None:
    assert answers_match(predicted, expected)


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [("(0, 1]", "[0, 1]"), ("\\sqrt{2}", "2"), ("\\{1, 2\\}", "\\{1, 2, 3\\}"), ("2,2", "22")],
)
def test_math_verify_refuses_different_latex_answers(predicted: str, expected: str) -> None:
    assert not answers_match(predicted, expected)


def test_math_verify_works_off_the_main_thread() -> None:
    """math-verify's own timeouts need the main thread (signal.alarm): tracegen runs it in
    a worker process, so threads (and Ray actors) get verdicts too."""
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(lambda pair: answers_match(*pair), [("\\sqrt{4}", "2")] * 4))
    assert verdicts == [True] * 4


def test_a_worker_that_does_not_answer_in_time_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tracegen.grading import mathverify

    monkeypatch.setattr(mathverify, "_WORKER", "import time\ntime.sleep(60)\n")
    monkeypatch.setattr(mathverify, "_worker", None)
    started = time.monotonic()
    assert mathverify.math_verify("1", "1", deadline_s=0.5) is None
    assert time.monotonic() - started < 5
    monkeypatch.undo()
    assert mathverify.math_verify("\\frac{1}{2}", "0.5") is True
