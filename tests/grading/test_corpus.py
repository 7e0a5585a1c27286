"""The judging corpus: problems written row for row in each dataset's format
(``tests/data/corpus/*.jsonl``, sources in its README) and programs of every shape, right,
wrong and hostile, in Python and C++ (``solutions.yaml``), each with the verdict it must get.

`tracegen verify SOLUTIONS --problems FILE --json` judges the whole corpus in a child
process, as root and as ``nobody``, under the builtin isolation and bubblewrap; every verdict
that differs from the corpus's is reported at once. A case marked ``xfail`` in the corpus is
one the judge still gets wrong: it must still be wrong (strict), so fixing it means removing
the mark.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.runs import tracegen
from tests.support.scenarios import write_jsonl
from tests.support.system_tools import NEEDS_BWRAP, NEEDS_GPP
from tests.support.unprivileged import NEEDS_ROOT, nobody_dir, run_script_as_nobody
from tracegen.problems import load_problems
from tracegen.schema import LANGUAGES

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"


@dataclass(frozen=True)
class Case:
    file: str
    problem_id: str
    program: str
    language: str
    code: str
    outcome: str
    reason: str | None
    xfail: str | None

    def row(self) -> dict[str, str]:
        return {"problem_id": self.problem_id, "code": self.code, "language": self.language}

    def label(self) -> str:
        return f"{self.file}.jsonl {self.problem_id!r} {self.program}"


def load_corpus() -> list[Case]:
    spec = yaml.safe_load((CORPUS / "solutions.yaml").read_text())
    programs: dict[str, dict[str, str]] = spec["programs"]
    cases = []
    for s in spec["solutions"]:
        program = programs[s["program"]]
        cases.append(
            Case(
                file=s["file"],
                problem_id=str(s["problem_id"]),
                program=s["program"],
                language=program["language"],
                code=program["code"],
                outcome=s["outcome"],
                reason=s.get("reason"),
                xfail=s.get("xfail"),
            )
        )
    return cases


CASES = load_corpus()
FILES = sorted({c.file for c in CASES})


def disagreement(case: Case, verdict: dict[str, Any]) -> str | None:
    """Why ``verdict`` is not the one ``case`` must get; None if it is."""
    outcome, error = verdict.get("outcome"), verdict.get("error") or ""
    got = f"{outcome} ({error[:160]!r})"
    if verdict.get("problem_id") != case.problem_id:
        return f"verdict for {verdict.get('problem_id')!r} in its place"
    if outcome != case.outcome:
        return f"{got}, not {case.outcome}"
    if (verdict.get("status") == "ok") != (outcome == "accepted"):
        return f"status {verdict.get('status')} with outcome {outcome}"
    if outcome != "accepted" and not error:
        return f"{outcome} without a reason"
    if case.reason is not None and case.reason not in error:
        return f"{got}: the reason does not say {case.reason!r}"
    return None


def solutions_file(directory: Path, file: str) -> Path:
    path = directory / f"{file}.solutions.jsonl"
    return write_jsonl(path, [c.row() for c in CASES if c.file == file])


def compare_all(verdicts: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every disagreement of the corpus with ``verdicts`` (by problem file, in order)."""
    problems: list[str] = []
    for file in FILES:
        cases = [c for c in CASES if c.file == file]
        got = verdicts.get(file, [])
        if len(got) != len(cases):
            problems.append(f"{file}.jsonl: {len(got)} verdicts for {len(cases)} solutions")
            continue
        for case, verdict in zip(cases, got, strict=True):
            why = disagreement(case, verdict)
            if why is not None and case.xfail is None:
                problems.append(f"{case.label()}: {why}")
            elif why is None and case.xfail is not None:
                problems.append(f"{case.label()}: right now (xfail {case.xfail!r} to remove)")
    return problems


def test_the_corpus_is_well_formed() -> None:
    """Every format has its file and is judged with Python and C++; every outcome is
    covered; every solution names a problem its file has."""
    assert set(FILES) == {
        "apps",
        "code_contests",
        "codeforces",
        "deepcoder",
        "livecodebench",
        "taco",
        "tracegen",
        "verifiable",
    }
    outcomes = {"accepted", "wrong", "time", "memory", "runtime", "compile", "output-limit"}
    for file in FILES:
        ids = {p.id for p in load_problems(str(CORPUS / f"{file}.jsonl"))}
        cases = [c for c in CASES if c.file == file]
        assert {c.problem_id for c in cases} <= ids, file
        assert {c.language for c in cases} == {"python", "cpp"}, file
    for language in ("python", "cpp"):
        assert {c.outcome for c in CASES if c.language == language} == outcomes
    assert {c.language for c in CASES} <= set(LANGUAGES)


Judge = Callable[[Path], dict[str, list[dict[str, Any]]]]


def judge_as_root(isolation: str) -> Judge:
    def judge(work: Path) -> dict[str, list[dict[str, Any]]]:
        verdicts = {}
        for file in FILES:
            args = ["verify", str(solutions_file(work, file)), "--problems"]
            args += [str(CORPUS / f"{file}.jsonl"), "--json", "--sandbox", isolation]
            done = tracegen(args, timeout=600)
            assert done.returncode == 0, f"{file}: {done.stderr}"
            verdicts[file] = [json.loads(line) for line in done.stdout.splitlines()]
        return verdicts

    return judge


NOBODY_IMPORTS = """
import asyncio, concurrent.futures.thread, contextlib, io, json, sys
from pathlib import Path
from tracegen.cli import main
import tracegen.generate.verify, tracegen.grading.programs, tracegen.problems.contests
import tracegen.sandbox.programs
# What the command line imports only when it parses (the interpreter's modules may be where
# nobody cannot read): a parse as root first.
sys.argv = ["tracegen", "verify", "--help"]
with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())), contextlib.suppress(SystemExit):
    main()
"""
NOBODY_SCRIPT = """
verdicts = {{}}
for file in {files!r}:
    out = Path({work!r}) / (file + ".verdicts.jsonl")
    sys.argv = ["tracegen", "verify", str(Path({work!r}) / (file + ".solutions.jsonl")),
                "--problems", str(Path({work!r}) / (file + ".jsonl")), "--json",
                "--sandbox", {isolation!r}, "-o", str(out)]
    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())):
        try:
            main()
        except SystemExit as e:
            assert not e.code, (file, e.code)
    verdicts[file] = [json.loads(line) for line in out.read_text().splitlines()]
print(json.dumps(verdicts))
"""


def judge_as_nobody(isolation: str) -> Judge:
    def judge(work: Path) -> dict[str, list[dict[str, Any]]]:
        with nobody_dir() as shared:
            for file in FILES:
                solutions_file(shared, file)
                (shared / f"{file}.jsonl").write_bytes((CORPUS / f"{file}.jsonl").read_bytes())
            script = NOBODY_SCRIPT.format(files=FILES, work=str(shared), isolation=isolation)
            return run_script_as_nobody(
                NOBODY_IMPORTS, script, cwd=shared, home=str(shared), timeout=900
            )

    return judge


@pytest.mark.slow
@NEEDS_GPP
@pytest.mark.parametrize(
    ("user", "isolation"),
    [
        ("root", "builtin"),
        pytest.param("root", "bwrap", marks=NEEDS_BWRAP),
        pytest.param("nobody", "builtin", marks=NEEDS_ROOT),
        pytest.param("nobody", "bwrap", marks=[NEEDS_ROOT, NEEDS_BWRAP]),
    ],
)
def test_the_corpus_is_judged_right_in_full(tmp_path: Path, user: str, isolation: str) -> None:
    judge = judge_as_root(isolation) if user == "root" else judge_as_nobody(isolation)
    wrong = compare_all(judge(tmp_path))
    assert not wrong, f"{len(wrong)} of {len(CASES)} verdicts wrong:\n" + "\n".join(wrong)
