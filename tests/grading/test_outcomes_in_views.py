"""Per-test outcomes of program problems reach `stats`, `report` and the RL exports."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.runs import tracegen
from tests.support.traces import write_traces
from tracegen.export.rl import episode_fields
from tracegen.schema import ExecResult, TestResult, Trace


def program_trace(trace_id: str, outcomes: list[str]) -> Trace:
    tests = [
        TestResult(name=f"t{i}", passed=o == "accepted", outcome=o)  # type: ignore[arg-type]
        for i, o in enumerate(outcomes)
    ]
    failed = next((o for o in outcomes if o != "accepted"), None)
    verdict = ExecResult(
        status="ok" if failed is None else "failed" if failed == "wrong" else "timeout",
        outcome=failed or "accepted",  # type: ignore[arg-type]
        tests=tests,
    )
    passed = sum(o == "accepted" for o in outcomes)
    return Trace(
        id=trace_id,
        problem_id="sum",
        mode="markers",
        model="m",
        verdict=verdict,
        score=passed / len(outcomes),
        success=failed is None,
    )


TRACES = [
    program_trace("a", ["accepted", "accepted"]),
    program_trace("b", ["accepted", "wrong"]),
    program_trace("c", ["time", "skipped"]),
]


def test_stats_counts_verdicts_and_tests_by_outcome(tmp_path: Path) -> None:
    path = write_traces(tmp_path / "traces.jsonl", TRACES)
    done = tracegen(["stats", str(path), "--json"])
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["outcomes"] == {"accepted": 1, "wrong": 1, "time": 1}
    assert stats["test_outcomes"] == {"accepted": 3, "wrong": 1, "time": 1, "skipped": 1}


def test_report_names_failures_by_outcome(tmp_path: Path) -> None:
    path = write_traces(tmp_path / "traces.jsonl", TRACES)
    out = tmp_path / "report.html"
    done = tracegen(["report", str(path), "-o", str(out)])
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "tests/wrong" in page and "tests/time" in page


def test_rl_records_carry_the_outcome_of_each_test() -> None:
    fields = episode_fields(TRACES[1])
    assert fields["outcome"] == "wrong"
    assert fields["test_outcomes"] == ["accepted", "wrong"]
    plain = Trace(id="d", problem_id="add", mode="markers", model="m")
    assert (episode_fields(plain)["outcome"], episode_fields(plain)["test_outcomes"]) == (None, [])
