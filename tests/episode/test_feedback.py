"""Execution feedback: per failing test its input, expected and actual value, capped."""

from __future__ import annotations

import orjson

from tests.support.episodes import ADD
from tracegen.episode.feedback import (
    MAX_FAILURES_SHOWN,
    MAX_OUTPUT_CHARS,
    execution_feedback,
    tool_json,
)
from tracegen.schema import ExecResult, Problem, TestCase, TestResult


def failed(*tests: TestResult) -> ExecResult:
    return ExecResult(status="failed", tests=list(tests))


def test_each_failing_test_shows_the_call_the_expected_and_the_actual_value() -> None:
    result = failed(
        TestResult(name="small", passed=True, expected="3", actual="3"),
        TestResult(name="negative", passed=False, expected="-3", actual="-5"),
    )
    assert execution_feedback(result, ADD, tested=True) == (
        "error",
        "1/2 tests passed.\n- add(-4, 1): expected -3, got -5",
    )


def test_a_test_that_raised_shows_the_last_line_of_the_error() -> None:
    error = "Traceback (most recent call last):\n  ...\nZeroDivisionError: division by zero"
    result = failed(TestResult(name="small", passed=False, error=error))
    _, text = execution_feedback(result, ADD, tested=True)
    assert text.endswith("- add(1, 2) raised ZeroDivisionError: division by zero")


def test_a_program_that_does_not_run_shows_its_error() -> None:
    result = ExecResult(status="error", error="SyntaxError: expected ':'")
    assert execution_feedback(result, ADD, tested=True) == (
        "error",
        "Error: SyntaxError: expected ':'",
    )
    timeout = ExecResult(status="timeout", error="wall-clock timeout")
    assert execution_feedback(timeout, ADD, tested=True)[1] == "Error: the program ran out of time"


def test_assert_and_check_tests_are_named_by_their_code_or_name() -> None:
    problem = ADD.model_copy(
        update={
            "tests": [
                TestCase(
                    name="a1", kind="assert", code="assert add(2, 2) == 4\nassert add(0, 0) == 0"
                ),
                TestCase(name="check", kind="check", code="def check(c): pass"),
            ]
        }
    )
    result = failed(
        TestResult(name="a1", passed=False, error="AssertionError"),
        TestResult(name="check", passed=False, error="AssertionError: wrong"),
    )
    _, text = execution_feedback(result, problem, tested=True)
    assert text.splitlines()[1:] == [
        "- assert add(2, 2) == 4 raised AssertionError",
        "- check raised AssertionError: wrong",
    ]


def test_feedback_is_capped_in_failures_shown_and_line_length() -> None:
    tests = [
        TestResult(name=f"t{i}", passed=False, expected="1", actual="x" * 1000) for i in range(9)
    ]
    problem = Problem(
        id="p",
        prompt="p",
        entry_point="f",
        tests=[TestCase(name=f"t{i}", kind="io", args=[i], expected=1) for i in range(9)],
    )
    _, text = execution_feedback(failed(*tests), problem, tested=True)
    lines = text.splitlines()
    assert len(lines) == 1 + MAX_FAILURES_SHOWN + 1
    assert lines[-1] == "- … and 4 more failing"
    assert all(len(line) <= 300 for line in lines)


def test_a_script_shows_its_output_and_tool_results_are_capped_json() -> None:
    run = ExecResult(status="error", exit_code=1, stdout="42\n", stderr="Trace\nValueError: no")
    assert execution_feedback(run, ADD, tested=False) == ("error", "42\nError: ValueError: no")
    assert execution_feedback(ExecResult(status="ok"), ADD, tested=False)[1] == "(no output)"
    big = orjson.loads(tool_json(ExecResult(status="ok", exit_code=0, stdout="y" * 10_000)))
    assert len(big["stdout"]) == MAX_OUTPUT_CHARS and big["stdout"].startswith("[truncated]")
    assert "error" not in big
