"""Forged verdicts: a program that attacks the judging passes no test it should fail, under
every isolation, through the sandbox API, `tracegen verify` and `tracegen run`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Reply
from tests.support.forgeries import FORGERIES, RLIMIT_GAPS, SQUARE
from tests.support.runs import tracegen
from tests.support.sandboxes import (
    ISOLATIONS,
    passed_tests,
    sandbox_processes,
)
from tests.support.scenarios import markers_reply, read_jsonl, run_args, task_of, write_jsonl
from tests.support.unprivileged import nobody_dir
from tracegen.sandbox import Sandbox

HONEST = "def square(x):\n    return x * x\n"


@pytest.mark.asyncio(loop_scope="module")
async def test_an_honest_solution_passes_every_kind_of_test(judged: Sandbox) -> None:
    result = await judged.run_tests(HONEST, SQUARE)
    assert (result.status, passed_tests(result)) == ("ok", ["io", "assert", "check"])


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("attack", list(FORGERIES))
async def test_forged_verdict_does_not_pass(
    judged: Sandbox, attack: str, request: pytest.FixtureRequest
) -> None:
    if judged.isolation == "rlimit" and attack in RLIMIT_GAPS:
        reason = "rlimit confines neither files nor other processes (docs/sandbox.md)"
        request.applymarker(pytest.mark.xfail(reason=reason, strict=False))
    result = await judged.run_tests(FORGERIES[attack], SQUARE)
    assert result.status != "ok", result
    assert passed_tests(result) == [], result
    assert sandbox_processes(judges=False) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_values_that_are_not_plain_data_fail_with_the_reason(judged: Sandbox) -> None:
    result = await judged.run_tests(FORGERIES["int-subclass-always-equal"], SQUARE)
    errors = [t.error or "" for t in result.tests]
    assert all("Yes (a subclass of int)" in e for e in errors), errors
    result = await judged.run_tests(FORGERIES["returns-a-generator"], SQUARE)
    assert all("generator" in (t.error or "") for t in result.tests), result.tests


@pytest.mark.asyncio(loop_scope="module")
async def test_the_judge_binds_setup_names_and_builtins_not_the_programs(judged: Sandbox) -> None:
    shadowing = FORGERIES["shadow-builtins-and-helpers"].replace(
        "return 0", "return x * x if x != 5 else 0"
    )
    result = await judged.run_tests(shadowing, SQUARE)
    assert [(t.name, t.passed) for t in result.tests] == [
        ("io", True),
        ("assert", True),
        ("check", False),
    ]


# ---------------------------------------------------------------- through the command line


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every uid can read, as a user's files usually are to that user's code."""
    with nobody_dir("tracegen-forgery-", mode=0o755) as path:
        yield path


def write_readable(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` in a file every uid can read."""
    write_jsonl(path, rows).chmod(0o644)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_forged_solutions_fail_through_tracegen_verify(shared_dir: Path, isolation: str) -> None:
    problems = write_readable(shared_dir / "problems.jsonl", [SQUARE.model_dump(by_alias=True)])
    names = ["honest", *FORGERIES]
    codes = [HONEST, *FORGERIES.values()]
    solutions = write_readable(
        shared_dir / "solutions.jsonl", [{"problem_id": "square", "code": c} for c in codes]
    )
    done = tracegen(
        ["verify", str(solutions), "--problems", str(problems), "--sandbox", isolation, "--json"]
    )
    assert done.returncode == 0, done.stderr
    verdicts = dict(zip(names, map(json.loads, done.stdout.splitlines()), strict=True))
    assert (verdicts["honest"]["status"], verdicts["honest"]["passed"]) == ("ok", 3)
    passing = {
        name: (v["status"], [t["name"] for t in v["tests"] if t["passed"]])
        for name, v in verdicts.items()
        if name != "honest" and (v["status"] == "ok" or v["passed"])
    }
    if isolation == "rlimit":
        assert "reads-the-problem-file" in passing and set(passing) <= RLIMIT_GAPS, passing
    else:
        assert passing == {}


@pytest.mark.slow
def test_a_model_that_answers_with_forgeries_gets_failing_traces(tmp_path: Path) -> None:
    tasks = {"honest": HONEST, **FORGERIES}
    rows = [
        SQUARE.model_copy(update={"id": name, "prompt": f"{SQUARE.prompt} (task {name})"})
        for name in tasks
    ]
    problems = write_readable(
        tmp_path / "problems.jsonl", [p.model_dump(by_alias=True) for p in rows]
    )

    def model(path: str, body: dict[str, Any]) -> Reply:
        return markers_reply(tasks[task_of(body)])

    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    with FakeOllama() as server:
        server.set_responder(model)
        args = run_args(server.url, out, "--problems", str(problems), "--rejects", str(rejects))
        done = tracegen([*args, "--only-success", "--exec-timeout", "3"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (honest,) = read_jsonl(out)
    assert (honest["problem_id"], honest["success"]) == ("honest", True)
    failed = {r["problem_id"]: r for r in read_jsonl(rejects)}
    assert sorted(failed) == sorted(set(tasks) - {"honest"})
    for name, trace in failed.items():
        assert not trace["success"] and trace["verdict"]["status"] != "ok", name
        assert not any(t["passed"] for t in trace["verdict"]["tests"]), name
    assert os.path.exists(out)
