"""`tracegen verify`: solutions and traces run against their problems' tests in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.scenarios import write_jsonl
from tracegen.cli import app
from tracegen.grading.verdicts import Verdict
from tracegen.jsonl import iter_lines, iter_records
from tracegen.problems import load_problems
from tracegen.schema import Trace

runner = CliRunner()


def verify_json(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["verify", *args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.slow
def test_humaneval_canonical_solutions_pass_and_broken_ones_fail(
    tmp_path: Path, humaneval_gz: Path
) -> None:
    rows = [row for _, row in iter_lines(humaneval_gz)]
    canonical = [
        {"problem_id": r["task_id"], "code": r["prompt"] + r["canonical_solution"]} for r in rows
    ]
    broken = [
        {"problem_id": r["task_id"], "code": r["prompt"] + "    raise NotImplementedError\n"}
        for r in rows
    ]
    solutions = write_jsonl(tmp_path / "solutions.jsonl", canonical + broken)
    verdicts = verify_json(str(solutions), "--problems", str(humaneval_gz))
    assert len(verdicts) == 328
    passing, failing = verdicts[:164], verdicts[164:]
    assert [v["problem_id"] for v in passing] == [r["task_id"] for r in rows]
    assert all(v["status"] == "ok" and v["passed"] == v["total"] == 1 for v in passing), [
        v for v in passing if v["status"] != "ok"
    ][:3]
    assert all(v["status"] == "failed" and v["passed"] == 0 for v in failing)
    assert all("NotImplementedError" in v["tests"][0]["error"] for v in failing)


def test_table_and_summary_count_passes_and_failures(tmp_path: Path) -> None:
    [two_sum] = load_problems(problem_ids=["two_sum"])
    solutions = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"problem_id": "two_sum", "code": two_sum.reference_solution},
            {"problem_id": "two_sum", "code": "def two_sum(nums, target):\n    return [0, 1]\n"},
            {"problem_id": "two_sum", "code": "def two_sum(nums, target)\n    return []\n"},
            {"problem_id": "reverse_string", "code": "x = 1\n"},
        ],
    )
    result = runner.invoke(app, ["verify", str(solutions)])
    assert result.exit_code == 0, result.output
    assert "4 solutions: 1 passed, 3 failed (error 2, failed 1)" in result.output
    assert f"{len(two_sum.tests)}/{len(two_sum.tests)}" in result.output


def test_trace_file_is_verified_through_its_final_code(tmp_path: Path) -> None:
    [fizz] = load_problems(problem_ids=["fizzbuzz"])
    traces = [
        Trace(
            id="t1",
            problem_id="fizzbuzz",
            mode="markers",
            model="m",
            final_code=fizz.reference_solution,
        ),
        Trace(id="t2", problem_id="fizzbuzz", mode="markers", model="m", final_code=None),
    ]
    path = write_jsonl(tmp_path / "traces.jsonl", [t.to_json() for t in traces])
    ok, missing = verify_json(str(path))
    assert (ok["trace_id"], ok["status"], ok["passed"]) == ("t1", "ok", len(fizz.tests))
    assert (missing["trace_id"], missing["status"], missing["passed"]) == ("t2", "error", 0)
    assert missing["error"] == "the trace has no final code"


def test_verdicts_file_holds_one_record_per_solution(tmp_path: Path) -> None:
    [rev] = load_problems(problem_ids=["reverse_string"])
    solutions = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"problem_id": "reverse_string", "code": rev.reference_solution},
            {"problem_id": "reverse_string", "code": "def reverse_string(s):\n    return s\n"},
        ],
    )
    out = tmp_path / "verdicts.jsonl"
    for _ in range(2):
        assert runner.invoke(app, ["verify", str(solutions), "-o", str(out)]).exit_code == 0
    verdicts = [v for _, v in iter_records(out, Verdict)]
    assert [(v.line, v.status) for v in verdicts] == [(1, "ok"), (2, "failed")]
    failed = {t.name for t in verdicts[1].tests if not t.passed}
    assert "word" in failed and "palindrome" not in failed


def test_math_solutions_are_checked_by_answer_or_printed_answer(
    tmp_path: Path, data_dir: Path
) -> None:
    solutions = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"problem_id": "gsm8k/0", "answer": "$18.00"},
            {"problem_id": "gsm8k/1", "code": "print('It takes', 2 + 2 // 2, 'bolts')"},
            {"problem_id": "gsm8k/2", "answer": "\\boxed{65000}"},
        ],
    )
    verdicts = verify_json(str(solutions), "--problems", str(data_dir / "gsm8k_sample.jsonl"))
    assert [v["status"] for v in verdicts] == ["ok", "ok", "failed"]
    assert verdicts[1]["tests"][0]["actual"] == "3"
    assert verdicts[2]["tests"][0] == {
        "name": "answer",
        "passed": False,
        "expected": "70000",
        "actual": "\\boxed{65000}",
        "error": None,
    }


def test_unknown_problem_id_is_exit_2_naming_file_and_line(tmp_path: Path) -> None:
    solutions = write_jsonl(
        tmp_path / "s.jsonl",
        [{"problem_id": "two_sum", "code": "x"}, {"problem_id": "three_sum", "code": "x"}],
    )
    result = runner.invoke(app, ["verify", str(solutions)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"tracegen: error: {solutions}:2: unknown problem_id 'three_sum' (not in builtin)"
    )


def test_bad_solution_files_are_exit_2(tmp_path: Path) -> None:
    malformed = tmp_path / "bad.jsonl"
    malformed.write_text('{"problem_id": "two_sum", "code": "x"}\n{"problem_id": \n')
    no_code = write_jsonl(tmp_path / "nocode.jsonl", [{"problem_id": "two_sum"}])
    cases = [
        ([str(malformed)], f"{malformed}:2: not valid JSON"),
        ([str(no_code)], f"{no_code}:1: missing 'code'"),
        ([str(tmp_path / "absent.jsonl")], "absent.jsonl: no such file"),
        ([str(no_code), "--sandbox", "docker"], "sandbox (flag): expected one of auto, bwrap"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["verify", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_mbpp_reference_solutions_pass_their_asserts(tmp_path: Path, data_dir: Path) -> None:
    source = str(data_dir / "mbpp_sample.jsonl")
    rows = [{"problem_id": p.id, "code": p.reference_solution} for p in load_problems(source)]
    verdicts = verify_json(str(write_jsonl(tmp_path / "s.jsonl", rows)), "--problems", source)
    assert [(v["problem_id"], v["status"]) for v in verdicts] == [
        (r["problem_id"], "ok") for r in rows
    ]
    assert verdicts[0]["total"] == 5
