"""tracegen's own problem files (JSONL and YAML), sources and selection."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.scenarios import write_jsonl
from tracegen.errors import ConfigError, ProblemFileError
from tracegen.problems import load_problems

ROOT = Path(__file__).resolve().parents[2]


def problem(pid: str = "add", **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": pid,
        "prompt": "Write add(a, b).",
        "entry_point": "add",
        "tests": [{"name": "t", "kind": "io", "args": [1, 2], "expected": 3}],
    }
    row.update(extra)
    return row


def test_jsonl_file_loads_with_or_without_schema_key(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "set.jsonl", [problem("a"), problem("b", schema="tracegen.problem/1")]
    )
    problems = load_problems(str(path))
    assert [p.id for p in problems] == ["a", "b"]
    assert problems[0].tests[0].expected == 3
    assert problems[0].source == "set"


def test_problem_without_tests_names_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a"), problem("b", tests=[])])
    with pytest.raises(ProblemFileError, match=rf"{path}:2: problem 'b' has no tests"):
        load_problems(str(path))


def test_problem_missing_tests_key_is_an_error(tmp_path: Path) -> None:
    row = problem("a")
    del row["tests"]
    path = write_jsonl(tmp_path / "p.jsonl", [row])
    with pytest.raises(ProblemFileError, match=rf"{path}:1: problem 'a' has no tests"):
        load_problems(str(path))


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a"), problem("b"), problem("a")])
    with pytest.raises(ProblemFileError, match=rf"{path}:3: duplicate problem id 'a'.*:1\)"):
        load_problems(str(path))


def test_malformed_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(orjson.dumps(problem("a")).decode() + "\n\n{not json\n")
    with pytest.raises(ProblemFileError, match=rf"{path}:3: not valid JSON"):
        load_problems(str(path))


def test_invalid_field_names_the_field(tmp_path: Path) -> None:
    bad = problem("a", tests=[{"name": "t", "kind": "oracle"}])
    path = write_jsonl(tmp_path / "p.jsonl", [bad])
    with pytest.raises(ProblemFileError, match=rf"{path}:1: not a valid problem: tests\.0\.kind"):
        load_problems(str(path))


def test_unknown_field_is_an_error_not_dropped(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a", solution="x")])
    with pytest.raises(ProblemFileError, match=r":1: not a valid problem: solution"):
        load_problems(str(path))


def test_trace_file_given_as_problems_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a", schema="tracegen.trace/1")])
    with pytest.raises(ProblemFileError, match=r":1: not a valid problem: schema"):
        load_problems(str(path))


def test_yaml_list_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(
        "- id: add\n"
        "  prompt: Write add(a, b).\n"
        "  entry_point: add\n"
        "  tests:\n"
        "    - {name: t, kind: assert, code: 'assert add(1, 2) == 3'}\n"
    )
    [p] = load_problems(str(path))
    assert p.id == "add" and p.tests[0].kind == "assert"


def test_yaml_error_names_the_line_of_the_offending_item(tmp_path: Path) -> None:
    path = tmp_path / "set.yml"
    path.write_text(
        "problems:\n"
        "  - id: ok\n"
        "    prompt: p\n"
        "    tests: [{name: t, kind: io, args: [], expected: 1}]\n"
        "\n"
        "  - id: empty\n"
        "    prompt: p\n"
        "    tests: []\n"
    )
    with pytest.raises(ProblemFileError, match=rf"{path}:6: problem 'empty' has no tests"):
        load_problems(str(path))


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text("- id: a\n  prompt: [unclosed\n  tests: []\n")
    with pytest.raises(ProblemFileError, match=rf"{path}:\d+: not valid YAML"):
        load_problems(str(path))


def test_yaml_that_is_not_a_list_of_problems_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text("id: a\nprompt: p\n")
    with pytest.raises(ProblemFileError, match="expected a list of problems"):
        load_problems(str(path))


def test_example_yaml_set_loads_every_test_kind() -> None:
    problems = load_problems(str(ROOT / "examples" / "problems.yaml"))
    kinds = {t.kind for p in problems for t in p.tests}
    assert kinds == {"io", "assert", "check", "answer"}
    assert {p.kind for p in problems} == {"code", "math"}


def test_unknown_source_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown problem source 'nope\.jsonl'.*builtin"):
        load_problems("nope.jsonl")


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(ProblemFileError, match="holds no problems"):
        load_problems(str(path))


def test_limit_and_problem_ids_select_in_source_order() -> None:
    assert [p.id for p in load_problems(limit=2)] == ["two_sum", "is_palindrome"]
    chosen = load_problems(problem_ids=["reverse_string", "two_sum"])
    assert [p.id for p in chosen] == ["two_sum", "reverse_string"]
    assert len(load_problems(problem_ids=["two_sum", "fizzbuzz"], limit=1)) == 1


def test_unknown_problem_id_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown problem id 'three_sum' in builtin"):
        load_problems(problem_ids=["two_sum", "three_sum"])


def test_limit_below_one_is_an_error() -> None:
    with pytest.raises(ConfigError, match="--limit"):
        load_problems(limit=0)
