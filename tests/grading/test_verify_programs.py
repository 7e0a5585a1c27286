"""`tracegen verify SOLUTIONS --problems FILE --json` on program problems, end to end in a
child process: each dataset's row format, Python and C++, as root and as ``nobody``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.contest_rows import LIVECODEBENCH_FUNCTIONAL, SUM_ROWS
from tests.support.programs import CPP, JAVA, OUTCOMES, PYTHON
from tests.support.runs import child_env, tracegen
from tests.support.scenarios import write_jsonl
from tests.support.system_tools import NEEDS_BWRAP, NEEDS_GPP, NEEDS_JAVAC
from tests.support.unprivileged import NEEDS_ROOT, nobody_dir, run_script_as_nobody


def verify(tmp_path: Path, row: dict[str, Any], solutions: list[dict[str, Any]]) -> list[Any]:
    problems = write_jsonl(tmp_path / "problems.jsonl", [row])
    answers = write_jsonl(tmp_path / "solutions.jsonl", solutions)
    done = tracegen(["verify", str(answers), "--problems", str(problems), "--json"])
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def shapes(problem_id: str, programs: dict[str, str], language: str) -> list[dict[str, Any]]:
    return [{"problem_id": problem_id, "code": c, "language": language} for c in programs.values()]


PY_SHAPES = [
    "accepted",
    "whitespace",
    "hard-coded",
    "wrong",
    "truncated",
    "extra",
    "memory",
    "crash",
    "outside",
    "syntax",
]


def test_every_python_shape_gets_its_verdict_with_a_reason(tmp_path: Path) -> None:
    """(Too slow and infinite programs: `test_each_dataset_format_judges_cpp` and the
    judge's own tests, in the slow tier.)"""
    row, problem_id = SUM_ROWS["code_contests"]
    programs = {name: PYTHON[name] for name in PY_SHAPES}
    verdicts = verify(tmp_path, row, shapes(problem_id, programs, "python"))
    got = {name: v["outcome"] for name, v in zip(programs, verdicts, strict=True)}
    assert got == {name: OUTCOMES[name] for name in programs}
    for v in verdicts:
        assert v["language"] == "python"
        assert (v["status"] == "ok") == (v["outcome"] == "accepted")
        if v["outcome"] != "accepted":
            assert v["error"], v  # the reason is named


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(SUM_ROWS))
def test_each_dataset_format_judges_python_right_and_wrong(tmp_path: Path, dataset: str) -> None:
    row, problem_id = SUM_ROWS[dataset]
    programs = {n: PYTHON[n] for n in ("accepted", "whitespace", "hard-coded", "truncated")}
    verdicts = verify(tmp_path, row, shapes(problem_id, programs, "python"))
    assert [v["outcome"] for v in verdicts] == ["accepted", "accepted", "wrong", "wrong"]


@pytest.mark.slow
@NEEDS_GPP
@pytest.mark.parametrize("dataset", sorted(SUM_ROWS))
def test_each_dataset_format_judges_cpp(tmp_path: Path, dataset: str) -> None:
    row, problem_id = SUM_ROWS[dataset]
    every = dataset == "code_contests"
    programs = {n: CPP[n] for n in (CPP if every else ("iostream", "hard-coded", "compile"))}
    verdicts = verify(tmp_path, row, shapes(problem_id, programs, "cpp"))
    got = {name: v["outcome"] for name, v in zip(programs, verdicts, strict=True)}
    assert got == {name: OUTCOMES[name] for name in programs}


@pytest.mark.slow
@NEEDS_JAVAC
@pytest.mark.parametrize("dataset", ["code_contests", "codeforces"])
def test_each_dataset_format_judges_java(tmp_path: Path, dataset: str) -> None:
    """Named ``java`` by the row, or by nothing (its ``main(String[])`` says so)."""
    row, problem_id = SUM_ROWS[dataset]
    names = ["accepted", "named", "hard-coded", "wrong", "crash", "compile", "busy"]
    rows = shapes(problem_id, {n: JAVA[n] for n in names}, "java")
    rows.append({"problem_id": problem_id, "code": JAVA["fast-io"]})
    verdicts = verify(tmp_path, row, rows)
    assert [v["outcome"] for v in verdicts] == [OUTCOMES[n] for n in [*names, "fast-io"]]
    assert {v["language"] for v in verdicts} == {"java"}


def test_cpp_without_gpp_is_an_error_naming_it_never_the_programs_fault(tmp_path: Path) -> None:
    """A machine without Debian's g++ (a PATH where it is not found): every C++ solution,
    right or not, is an `error` naming g++; Python solutions are judged as ever."""
    row, problem_id = SUM_ROWS["code_contests"]
    cpp = shapes(problem_id, {n: CPP[n] for n in ("accepted", "wrong", "compile")}, "cpp")
    untagged = {"problem_id": problem_id, "code": CPP["accepted"]}  # C++ by its #include
    python = shapes(problem_id, {"accepted": PYTHON["accepted"]}, "python")
    problems = write_jsonl(tmp_path / "problems.jsonl", [row])
    answers = write_jsonl(tmp_path / "solutions.jsonl", [*cpp, untagged, *python])
    empty = tmp_path / "bin"
    empty.mkdir()
    args = ["verify", str(answers), "--problems", str(problems), "--json"]
    done = tracegen(args, env=child_env(PATH=str(empty)))
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    for v in verdicts[:4]:
        assert (v["status"], v["outcome"]) == ("error", "error"), v
        assert v["error"] == "cannot run cpp: g++ is not installed"
        assert all(t["outcome"] == "error" for t in v["tests"])
    assert verdicts[4]["outcome"] == "accepted"


def test_livecodebench_functional_row_end_to_end(tmp_path: Path) -> None:
    right = "class Solution:\n    def addTwo(self, a: int, b: int) -> int:\n        return a + b\n"
    public_only = "class Solution:\n    def addTwo(self, a, b):\n        return 5\n"
    uses_prelude = (  # LiveCodeBench's grader imports collections (and more) first
        "class Solution:\n    def addTwo(self, a: List[int], b) -> int:\n"
        "        return sum(deque([a, b]))\n"
    )
    verdicts = verify(
        tmp_path,
        LIVECODEBENCH_FUNCTIONAL,
        [{"problem_id": "3999", "code": c} for c in (right, public_only, uses_prelude)],
    )
    assert [v["outcome"] for v in verdicts] == ["accepted", "wrong", "accepted"]


NOBODY_IMPORTS = """
import asyncio, concurrent.futures.thread, json
from pathlib import Path
from tracegen.config import RunSettings
from tracegen.generate.verify import verify_command
import tracegen.grading.programs, tracegen.problems.contests, tracegen.sandbox.programs
"""
NOBODY_SCRIPT = """
settings = RunSettings(problems={problems!r}, sandbox={isolation!r})
verify_command(settings, solutions=Path({solutions!r}), output=Path({out!r}), json_out=True)
print(json.dumps([json.loads(line) for line in Path({out!r}).read_text().splitlines()]))
"""


def verify_as_nobody(row: dict[str, Any], rows: list[dict[str, Any]], isolation: str) -> Any:
    """`verify_command`'s verdicts on ``rows`` (solutions to problem ``row``), run as
    ``nobody`` in a directory of its own."""
    with nobody_dir() as work:
        problems = write_jsonl(work / "problems.jsonl", [row])
        solutions = write_jsonl(work / "solutions.jsonl", rows)
        script = NOBODY_SCRIPT.format(
            solutions=str(solutions),
            problems=str(problems),
            out=str(work / "verdicts.jsonl"),
            isolation=isolation,
        )
        return run_script_as_nobody(NOBODY_IMPORTS, script, cwd=work, home=str(work))


@pytest.mark.slow
@NEEDS_ROOT
@NEEDS_GPP
@pytest.mark.parametrize("isolation", ["builtin", pytest.param("bwrap", marks=NEEDS_BWRAP)])
def test_verdicts_as_nobody(isolation: str) -> None:
    row, problem_id = SUM_ROWS["code_contests"]
    names = ["accepted", "hard-coded", "busy", "memory", "segfault", "outside"]
    rows = shapes(problem_id, {n: PYTHON[n] for n in names}, "python")
    cpp_names = ["accepted", "wrong", "segfault", "compile", "outside"]
    rows += shapes(problem_id, {n: CPP[n] for n in cpp_names}, "cpp")
    verdicts = verify_as_nobody(row, rows, isolation)
    outcomes = [v["outcome"] for v in verdicts]
    assert outcomes == [OUTCOMES[n] for n in names] + [OUTCOMES[n] for n in cpp_names]


@pytest.mark.slow
@NEEDS_ROOT
@NEEDS_JAVAC
@pytest.mark.parametrize("isolation", ["builtin", pytest.param("bwrap", marks=NEEDS_BWRAP)])
def test_java_verdicts_as_nobody(isolation: str) -> None:
    row, problem_id = SUM_ROWS["code_contests"]
    names = ["accepted", "threads", "wrong", "memory", "crash", "outside", "compile"]
    rows = shapes(problem_id, {n: JAVA[n] for n in names}, "java")
    verdicts = verify_as_nobody(row, rows, isolation)
    assert [v["outcome"] for v in verdicts] == [OUTCOMES[n] for n in names]


def test_java_without_javac_is_an_error_naming_it(tmp_path: Path) -> None:
    row, problem_id = SUM_ROWS["code_contests"]
    rows = shapes(problem_id, {n: JAVA[n] for n in ("accepted", "compile")}, "java")
    rows.append({"problem_id": problem_id, "code": JAVA["accepted"]})  # Java by its main
    problems = write_jsonl(tmp_path / "problems.jsonl", [row])
    answers = write_jsonl(tmp_path / "solutions.jsonl", rows)
    empty = tmp_path / "bin"
    empty.mkdir()
    args = ["verify", str(answers), "--problems", str(problems), "--json"]
    done = tracegen(args, env=child_env(PATH=str(empty)))
    assert done.returncode == 0, done.stderr
    for v in map(json.loads, done.stdout.splitlines()):
        assert (v["outcome"], v["error"]) == ("error", "cannot run java: javac is not installed")
