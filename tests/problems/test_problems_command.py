"""`tracegen problems`: the table, and JSON lines a script (or tracegen) can read back."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tracegen.cli import app
from tracegen.problems import load_problems

runner = CliRunner()


def test_table_lists_ids_entry_points_and_test_counts() -> None:
    result = runner.invoke(app, ["problems", "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert "builtin: 3 problems" in result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    for p, row in zip(load_problems(limit=3), rows, strict=True):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[:4] == [p.id, "code", p.entry_point, str(len(p.tests))]


def test_json_lines_are_problems_that_load_back(tmp_path: Path) -> None:
    result = runner.invoke(app, ["problems", "--json", "--problem-ids", "two_sum, fizzbuzz"])
    assert result.exit_code == 0, result.output
    exported = tmp_path / "exported.jsonl"
    exported.write_text(result.stdout)
    assert load_problems(str(exported)) == load_problems(problem_ids=["two_sum", "fizzbuzz"])


def test_bad_problem_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prompt": "p", "tests": []}\n')
    result = runner.invoke(app, ["problems", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"tracegen: error: {path}:1: problem 'a' has no tests"
    ]


def test_unknown_id_is_exit_2_naming_it() -> None:
    result = runner.invoke(app, ["problems", "--problem-ids", "two_sum,nope"])
    assert result.exit_code == 2
    assert "unknown problem id 'nope'" in result.stderr
