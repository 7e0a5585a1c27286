"""Attacks on the judging itself (`tests.support.judge_attacks`): every wrong program fails
every test and every right one passes, under every isolation, as root and as a normal user."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.judge_attacks import ATTACKS, MAPPED, RIGHT, SQUARE
from tests.support.sandboxes import EACH_ISOLATION, ISOLATIONS, LIMITS, sandbox_processes
from tracegen.sandbox import Sandbox, _harness, _wire
from tracegen.schema import ExecResult, Problem, TestCase

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[2]


def passed_tests(result: ExecResult) -> list[str]:
    return [t.name for t in result.tests if t.passed]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EACH_ISOLATION)
async def judged(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []


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

SCRIPT = r"""
import asyncio, concurrent.futures.thread, json, os, sys
sys.path[:0] = [{root!r}, {src!r}]
from tests.support.forgeries import FORGERIES, RLIMIT_USER_GAPS, SQUARE
from tests.support.judge_attacks import ATTACKS, RIGHT, Case
from tracegen.sandbox import Sandbox, SandboxLimits, isolation

os.setgroups([])
os.setresgid({uid}, {uid}, {uid})
os.setresuid({uid}, {uid}, {uid})
if not os.access(isolation.python_executable(), os.X_OK):
    # The interpreter tracegen runs under sits where nobody cannot go (a pyenv under
    # /root): the sandbox needs only the standard library, of any Python {version}.
    isolation.python_executable = lambda: {system_python!r}
    isolation._python_dirs = lambda: []  # bwrap: the system's Python is under /usr

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


def _system_python() -> str | None:
    """A Python of the same minor version that every uid can run."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture
def shared() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tracegen-nobody-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_attacks_on_the_judging_fail_for_a_user_without_root(shared: Path, isolation: str) -> None:
    """Both corpora (the first one's rlimit gaps aside: the isolation table of docs/sandbox.md)."""
    if isolation == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bwrap (bubblewrap) is not installed")
    system_python = _system_python()
    if system_python is None:
        pytest.skip("no Python of this version that uid nobody can run")
    script = SCRIPT.format(
        root=str(ROOT),
        src=str(ROOT / "src"),
        uid=NOBODY,
        system_python=system_python,
        version=f"{sys.version_info.major}.{sys.version_info.minor}",
        isolation=isolation,
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=shared,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(shared)},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
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
    problems: list[Problem] = [case.problem for case in (*ATTACKS.values(), *RIGHT.values())]
    assert all(isinstance(t, TestCase) for p in problems for t in p.tests)


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
