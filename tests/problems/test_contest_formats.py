"""Competitive-programming datasets read in their own row formats (`tests/support/contest_rows`
holds a row of each, written as the dataset ships it); LiveCodeBench's pickled private tests
are decoded without ever building an object."""

from __future__ import annotations

import base64
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.contest_rows import (
    APPS_CALL_BASED,
    CODE_CONTESTS,
    CODEFORCES,
    LIVECODEBENCH,
    LIVECODEBENCH_FUNCTIONAL,
    SUM_ROWS,
    TACO,
)
from tracegen.errors import ProblemFileError
from tracegen.problems import contests, load_problems
from tracegen.problems.contests import decode_lcb_tests
from tracegen.schema import Problem


def load_row(tmp_path: Path, row: dict[str, Any], name: str = "rows.jsonl") -> Problem:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(row) + b"\n")
    [problem] = load_problems(str(path))
    return problem


@pytest.mark.parametrize("dataset", sorted(SUM_ROWS))
def test_each_dataset_row_becomes_a_program_problem_with_its_own_id(
    tmp_path: Path, dataset: str
) -> None:
    row, problem_id = SUM_ROWS[dataset]
    problem = load_row(tmp_path, row)
    assert problem.id == problem_id
    assert problem.is_program
    assert [t.input for t in problem.tests][:2] == ["2 3\n", "10 20\n"]
    public = [t for t in problem.tests if not t.private]
    assert [t.expected for t in public] == ["5\n"]  # the model is shown this one only
    assert all(t.private for t in problem.tests[1:])


def test_code_contests_limits_and_groups(tmp_path: Path) -> None:
    problem = load_row(tmp_path, CODE_CONTESTS)
    assert problem.limits is not None
    assert (problem.limits.time_s, problem.limits.memory_mb) == (1.5, 256)
    assert [t.name for t in problem.tests] == ["public_1", "private_1", "private_2", "generated_1"]
    assert problem.input_file is None and problem.output_file is None
    named = load_row(tmp_path, {**CODE_CONTESTS, "input_file": "in.txt", "output_file": "o.txt"})
    assert (named.input_file, named.output_file) == ("in.txt", "o.txt")


def test_taco_ids_are_row_indexes_and_limits_are_read_from_text(tmp_path: Path) -> None:
    path = tmp_path / "taco.jsonl"
    path.write_bytes(b"".join(orjson.dumps(TACO) + b"\n" for _ in range(3)))
    problems = load_problems(str(path))
    assert [p.id for p in problems] == ["0", "1", "2"]
    assert problems[0].limits is not None
    assert (problems[0].limits.time_s, problems[0].limits.memory_mb) == (2.0, 256)


def test_apps_call_based_row_is_functional_and_accepts_the_unwrapped_value(
    tmp_path: Path,
) -> None:
    problem = load_row(tmp_path, APPS_CALL_BASED)
    assert problem.entry_point == "add" and problem.language == "python"
    assert [(t.kind, t.args, t.expected) for t in problem.tests] == [
        ("functional", [2, 3], [5]),
        ("functional", [10, 20], [30]),
    ]
    assert problem.compare is not None and problem.compare.unwrap_single


def test_deepcoder_row_with_tacos_call_based_tests_accepts_the_unwrapped_value(
    tmp_path: Path,
) -> None:
    """DeepCoder's TACO-derived rows keep TACO's ``{inputs, outputs, fn_name}``, outputs
    wrapped in a list; rLLM grades them with TACO's ``run_test`` (and its
    ``taco_to_lcb_format`` takes ``outputs[i][0]``), so ``add`` returning 5 is right."""
    row = {
        "problem": "Write add(a, b) returning a + b.",
        "tests": orjson.dumps(
            {"inputs": [[2, 3], [10, 20]], "outputs": [[5], [30]], "fn_name": "add"}
        ).decode(),
        "metadata": "{}",
    }
    problem = load_row(tmp_path, row)
    assert problem.entry_point == "add"
    assert problem.compare is not None and problem.compare.unwrap_single


def test_livecodebench_functional_row_calls_solution_method(tmp_path: Path) -> None:
    problem = load_row(tmp_path, LIVECODEBENCH_FUNCTIONAL)
    assert problem.entry_point == "Solution.addTwo"
    assert [(t.args, t.expected, t.private) for t in problem.tests] == [
        ([2, 3], 5, False),
        ([10, 20], 30, True),
    ]
    assert "class Solution" in problem.prompt  # the starter code is shown


def test_livecodebench_stdin_row_uses_its_graders_line_rule(tmp_path: Path) -> None:
    problem = load_row(tmp_path, LIVECODEBENCH)
    assert problem.compare is not None and problem.compare.rule == "lines"


def test_codeforces_file_mode_and_checker(tmp_path: Path) -> None:
    checker = "import sys\nprint(1)\n"
    row = {**CODEFORCES, "input_mode": "file", "generated_checker": checker}
    problem = load_row(tmp_path, row)
    assert (problem.input_file, problem.output_file) == ("input.txt", "output.txt")
    assert problem.compare is not None
    assert (problem.compare.rule, problem.compare.checker) == ("checker", checker)
    assert "Example 1" in problem.prompt and "official" not in problem.prompt


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch /tmp/tracegen-pwned",))


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_Boom(), id="os.system"),
        pytest.param(["a", "list"], id="list"),
        pytest.param(b"bytes", id="bytes"),
    ],
)
def test_a_pickle_of_anything_but_a_string_is_refused(tmp_path: Path, payload: Any) -> None:
    packed = base64.b64encode(zlib.compress(pickle.dumps(payload))).decode()
    with pytest.raises(ValueError, match="private_test_cases"):
        decode_lcb_tests(packed)
    row = {**LIVECODEBENCH, "private_test_cases": packed}
    path = tmp_path / "lcb.jsonl"
    path.write_bytes(orjson.dumps(row) + b"\n")
    with pytest.raises(ProblemFileError, match=r"lcb.jsonl:1: not a valid LiveCodeBench"):
        load_problems(str(path))
    assert not Path("/tmp/tracegen-pwned").exists()


def test_a_decompression_bomb_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contests, "MAX_DECODED", 1 << 20)
    bomb = base64.b64encode(zlib.compress(pickle.dumps("x" * (2 << 20)), 9)).decode()
    with pytest.raises(ValueError, match="expands to more than"):
        decode_lcb_tests(bomb)


def test_functional_tests_without_an_entry_point_are_refused_when_loaded(tmp_path: Path) -> None:
    row = {
        "id": "f",
        "prompt": "p",
        "tests": [{"name": "t", "kind": "functional", "args": [1], "expected": 1}],
    }
    with pytest.raises(ProblemFileError, match=r"rows.jsonl:1: .*entry_point"):
        load_row(tmp_path, row)
