"""Attacks on the judging itself (`tests.support.judge_attacks`): every wrong program fails
every test and every right one passes, under every isolation, as root and as a normal user."""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import pytest

from tests.support.judge_attacks import ATTACKS, MAPPED, RIGHT, SQUARE
from tests.support.sandboxes import ISOLATIONS, passed_tests, sandbox_processes
from tests.support.unprivileged import NEEDS_ROOT, NOBODY, nobody_dir, run_script_as_nobody
from tracegen.sandbox import Sandbox, _harness, _wire
from tracegen.schema import Problem


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_an_attack_on_the_judging_passes_no_test(judged: Sandbox, attack: str) -> None:
    case = ATTACKS[attack]
    result = await judged.run_tests(case.code, case.problem)
    assert result.status != "ok", result
    assert passed_tests(result) == [], result
    assert sandbox_processes(judges=False) == []


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", list(RIGHT))
async def test_a_right_program_passes_every_test(judged: Sandbox, name: str) -> None:
    case = RIGHT[name]
    result = await judged.run_tests(case.code, case.problem)
    assert result.status == "ok", result
    assert len(passed_tests(result)) == len(case.problem.tests)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_stop_iteration_fails_the_test_as_a_runtime_error(judged: Sandbox) -> None:
    result = await judged.run_tests(ATTACKS["raises-stop-iteration"].code, MAPPED)
    assert result.status == "failed"
    errors = {t.name: t.error for t in result.tests}
    assert errors["all-map"] == "RuntimeError: square raised StopIteration"
    assert errors["except-exception"] == "AssertionError: assert got == x * x"


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    "attack",
    [
        "injects-ready-and-answers-at-import",
        "answers-twice-from-inside-the-call",
        "swaps-in-a-calls-pipe-of-its-own",
    ],
)
async def test_answers_not_made_for_their_call_garble_the_channel(
    judged: Sandbox, attack: str
) -> None:
    result = await judged.run_tests(ATTACKS[attack].code, SQUARE)
    assert (result.status, result.error) == (
        "error",
        "the program garbled its channel to the tests",
    )


@pytest.mark.asyncio(loop_scope="module")
async def test_the_judge_imports_no_script_the_program_names(judged: Sandbox) -> None:
    case = ATTACKS["binds-a-test-name-to-a-module-that-runs-on-import"]
    honest = case.code.replace("return 0", "return x * x")
    result = await judged.run_tests(honest, case.problem)
    assert result.tests[0].error == "NameError: name 'util' is not defined", result


@pytest.mark.parametrize(
    ("actual", "expected", "equal"),
    [
        (10_000_005.0, 10_000_000, False),  # within a relative 1e-6 of an int: not equal
        (10_000_000.0, 10_000_000, True),
        (10_000_001, 10_000_000, False),
        (True, 1, False),
        (1, True, False),
        (2.5 * (1 + 1e-7), 2.5, True),  # a float within the documented tolerance
        (2.5 * (1 + 1e-5), 2.5, False),
        (3, 3.0, True),
        (1e-10, 0.0, True),  # the absolute tolerance near zero
        (1e-10, 0, False),
        (-0.0, 0.0, True),
        (math.nan, 1.0, False),
        (math.nan, math.nan, True),
        (math.inf, 1e308, False),
        (math.inf, math.inf, True),
        (-math.inf, math.inf, False),
        (math.nan, 0, False),
        (10**400, 1.0, False),  # too big for a float: unequal, not an OverflowError
        ([1, 2.0], [1, 2], True),
        ([1, 2.5], [1, 2], False),
        ({"a": 1.0}, {"a": 1}, True),
        ("1", 1, False),
        (None, None, True),
    ],
)
def test_io_values_compare_exactly_for_ints_within_a_tolerance_for_floats(
    actual: Any, expected: Any, equal: bool
) -> None:
    assert _wire.values_equal(actual, expected) is equal


# ---------------------------------------------------------------- as a normal user

IMPORTS = """
import asyncio, concurrent.futures.thread, json, os, sys
from tests.support.forgeries import FORGERIES, RLIMIT_USER_GAPS, SQUARE
from tests.support.judge_attacks import ATTACKS, RIGHT, Case
from tracegen.sandbox import Sandbox, SandboxLimits
"""
SCRIPT = r"""

async def main():
    out = {{"uid": os.getuid()}}
    limits = SandboxLimits(timeout_s=3, cpu_s=3, memory_mb=512, processes=64)
    async with Sandbox({isolation!r}, limits=limits, concurrency=2) as sandbox:
        out["isolation"] = sandbox.isolation
        forgeries = {{n: Case(SQUARE, c) for n, c in FORGERIES.items()}}
        if {isolation!r} == "rlimit":
            forgeries = {{n: c for n, c in forgeries.items() if n not in RLIMIT_USER_GAPS}}
        for group, cases in (("attack", ATTACKS), ("forgery", forgeries), ("right", RIGHT)):
            for name, case in cases.items():
                r = await sandbox.run_tests(case.code, case.problem)
                out[group + ":" + name] = [r.status, [t.name for t in r.tests if t.passed]]
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.slow
@NEEDS_ROOT
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_attacks_on_the_judging_fail_for_a_user_without_root(isolation: str) -> None:
    """Both corpora (the first one's rlimit gaps aside: the isolation table of docs/sandbox.md)."""
    with nobody_dir() as shared:
        out = run_script_as_nobody(
            IMPORTS, SCRIPT.format(isolation=isolation), cwd=shared, home=str(shared), timeout=600
        )
    assert (out["uid"], out["isolation"]) == (NOBODY, isolation)
    attacks = ("attack:", "forgery:")
    passing = {k: v for k, v in out.items() if k.startswith(attacks) and (v[0] == "ok" or v[1])}
    assert passing == {}
    failing = {k: v for k, v in out.items() if k.startswith("right:") and v[0] != "ok"}
    assert failing == {}
    assert len([k for k in out if k.startswith("attack:")]) == len(ATTACKS)


def test_the_corpus_covers_forty_classes_of_attack() -> None:
    from tests.support.forgeries import FORGERIES

    assert len(ATTACKS) >= 40
    assert not set(ATTACKS) & set(FORGERIES)


# ---------------------------------------------------------------- the channel, in process


def judge_over_pipes(code: str, problem: Problem, ahead: bytes = b"") -> dict[str, Any]:
    """The judge's report on ``code``, its candidate served by a thread of this process;
    ``ahead`` is written to the judge's channel before the candidate starts."""
    calls_r, calls_w = os.pipe()
    answers_r, answers_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    request = {"setup": problem.setup, "code": code, "entry_point": problem.entry_point}
    os.write(stdin_w, _wire.dumps(request))
    os.close(stdin_w)
    os.write(answers_w, ahead)
    candidate = threading.Thread(
        target=_harness.serve_candidate, args=(stdin_r, answers_w, calls_r), daemon=True
    )
    candidate.start()
    fields = {"name", "kind", "args", "kwargs", "code"}
    tests = [t.model_dump(include=fields) for t in problem.tests]
    payload = {"setup": problem.setup, "entry_point": problem.entry_point, "tests": tests}
    try:
        return _harness.judge(payload, _harness._Channel(calls_w, answers_r))
    finally:
        os.close(calls_w)
        candidate.join(5)
        for fd in (calls_r, answers_r, answers_w, stdin_r):
            os.close(fd)


HONEST_SQUARE = "def square(x):\n    return x * x\n"


def test_over_pipes_an_honest_candidate_passes() -> None:
    report = judge_over_pipes(HONEST_SQUARE, SQUARE)
    assert report["channel"] == "ok"
    assert [t["passed"] for t in report["tests"]] == [None, True, True]
    assert report["tests"][0]["value"] == 9


@pytest.mark.parametrize(
    "ahead",
    [
        b'{"phase": "ready", "names": {"square": "call"}}\n["ok", [9]]\n',  # unbound answers
        b'[null, "ready", {"square": "call"}]\n',
        b'["00000000000000000000000000000000", "ready", {"square": "call"}]\n',
        b'[0, "ready", {"square": "call"}]\n',
    ],
)
def test_over_pipes_a_line_written_before_its_call_garbles_the_channel(ahead: bytes) -> None:
    report = judge_over_pipes(HONEST_SQUARE, SQUARE, ahead)
    assert (report["channel"], report["tests"]) == ("garbled", [])
