"""Ordinary executions: verdicts per test kind, expected vs actual, setup, scripts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tracegen.errors import SandboxError
from tracegen.sandbox import Sandbox, detect_isolation, isolation
from tracegen.schema import Problem, TestCase


def problem(*tests: TestCase, entry_point: str | None = "f", setup: str = "") -> Problem:
    return Problem(id="p", prompt="", entry_point=entry_point, tests=list(tests), setup=setup)


def io(name: str, args: list, expected: object) -> TestCase:
    return TestCase(name=name, kind="io", args=args, expected=expected)


async def test_passing_solution_is_ok_with_one_result_per_test(sandbox: Sandbox) -> None:
    p = problem(io("a", [1, 2], 3), io("b", [0, 0], 0))
    result = await sandbox.run_tests("def f(a, b):\n    return a + b\n", p)
    assert result.status == "ok"
    assert [(t.name, t.passed) for t in result.tests] == [("a", True), ("b", True)]


async def test_failing_test_reports_expected_and_actual(sandbox: Sandbox) -> None:
    p = problem(io("good", [2], 4), io("bad", [3], 9))
    result = await sandbox.run_tests("def f(x):\n    return x + x\n", p)
    assert result.status == "failed"
    bad = result.tests[1]
    assert (bad.passed, bad.expected, bad.actual) == (False, "9", "6")
    assert result.passed == 1 and result.total == 2


async def test_exception_in_a_test_names_the_error(sandbox: Sandbox) -> None:
    result = await sandbox.run_tests("def f(x):\n    return 1 / x\n", problem(io("zero", [0], 1)))
    assert result.status == "failed"
    assert result.tests[0].error == "ZeroDivisionError: division by zero"


async def test_tuples_equal_lists_and_floats_have_a_tolerance(sandbox: Sandbox) -> None:
    p = problem(io("tuple", [], [[1, 2], 0.3]))
    result = await sandbox.run_tests("def f():\n    return ((1, 2), 0.1 + 0.2)\n", p)
    assert result.status == "ok"


async def test_bool_does_not_pass_for_an_int(sandbox: Sandbox) -> None:
    result = await sandbox.run_tests("def f():\n    return True\n", problem(io("one", [], 1)))
    assert result.status == "failed"


async def test_object_claiming_equality_with_everything_fails(sandbox: Sandbox) -> None:
    code = (
        "class Any:\n    def __eq__(self, o):\n        return True\n\ndef f():\n    return Any()\n"
    )
    result = await sandbox.run_tests(code, problem(io("x", [], 5)))
    assert result.status == "failed"


async def test_assert_tests_run_in_the_solution_namespace(sandbox: Sandbox) -> None:
    tests = [
        TestCase(name="ok", kind="assert", code="assert double(2) == 4"),
        TestCase(name="no", kind="assert", code="assert double(3) == 7"),
    ]
    p = problem(*tests, entry_point=None)
    result = await sandbox.run_tests("def double(x):\n    return 2 * x\n", p)
    assert [t.passed for t in result.tests] == [True, False]
    assert result.tests[1].error == "AssertionError: assert double(3) == 7"


async def test_check_tests_call_check_with_the_entry_point(sandbox: Sandbox) -> None:
    check = "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(2) == 5\n"
    result = await sandbox.run_tests(
        "def f(x):\n    return x * x\n", problem(TestCase(name="c", kind="check", code=check))
    )
    assert result.status == "failed"
    assert result.tests[0].error == "AssertionError: assert candidate(2) == 5"


async def test_tests_see_the_programs_functions_constants_and_imports(sandbox: Sandbox) -> None:
    code = (
        "import math\nLIMIT = 10\n"
        "def double(x):\n    return 2 * x\ndef halve(x):\n    return x / 2\n"
    )
    test = "assert double(LIMIT) == 20 and halve(5) == 2.5 and math.floor(2.5) == 2\n"
    p = problem(TestCase(name="t", kind="assert", code=test), entry_point=None)
    result = await sandbox.run_tests(code, p)
    assert (result.status, result.tests[0].error) == ("ok", None)


async def test_exceptions_the_program_raises_reach_the_tests_as_themselves(
    sandbox: Sandbox,
) -> None:
    check = (
        "def check(candidate):\n"
        "    try:\n        candidate(-1)\n    except ValueError as e:\n"
        "        assert 'negative' in str(e)\n    else:\n        raise AssertionError('no error')\n"
        "    assert candidate(4) == 2\n"
    )
    code = (
        "class Negative(ValueError):\n    pass\n"
        "def f(x):\n    if x < 0:\n        raise Negative('negative input')\n"
        "    return int(x ** 0.5)\n"
    )
    result = await sandbox.run_tests(code, problem(TestCase(name="c", kind="check", code=check)))
    assert result.status == "ok", result.tests


async def test_setup_runs_before_the_solution(sandbox: Sandbox) -> None:
    p = problem(io("a", [[3, 1]], [1, 3]), setup="from typing import List\nKEY = None\n")
    code = "def f(xs: List[int]) -> List[int]:\n    return sorted(xs, key=KEY)\n"
    assert (await sandbox.run_tests(code, p)).status == "ok"


async def test_answer_only_problem_just_runs_the_code(sandbox: Sandbox) -> None:
    p = Problem(
        id="m",
        prompt="",
        kind="math",
        tests=[TestCase(name="answer", kind="answer", expected="42")],
    )
    result = await sandbox.run_tests("print(6 * 7)", p)
    assert (result.status, result.stdout, result.tests) == ("ok", "42\n", [])


async def test_run_code_captures_stdout_stderr_and_exit_status(sandbox: Sandbox) -> None:
    result = await sandbox.run_code("import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        "ok",
        0,
        "out\n",
        "err\n",
    )


async def test_run_code_exception_gives_error_with_traceback(sandbox: Sandbox) -> None:
    result = await sandbox.run_code("x = 1\nraise ValueError('boom')\n")
    assert (result.status, result.exit_code) == ("error", 1)
    assert result.error == "ValueError: boom"
    assert 'File "<code>", line 2' in result.stderr and "<string>" not in result.stderr


async def test_run_code_nonzero_exit_is_an_error(sandbox: Sandbox) -> None:
    result = await sandbox.run_code("import sys\nsys.exit(3)\n")
    assert (result.status, result.exit_code) == ("error", 3)


async def test_submodules_of_preloaded_standard_packages_import_lazily(sandbox: Sandbox) -> None:
    code = (
        "import codecs, importlib.resources\n"
        "codecs.lookup('idna')\n"
        "print('127.0.0.1'.encode('idna'), 'bücher'.encode('punycode'), 'é'.encode('cp437'))\n"
        "import collections.abc, ctypes.util, importlib.util, json.tool, re._casefix\n"
        "print(importlib.resources.files('json').joinpath('decoder.py').is_file())\n"
    )
    result = await sandbox.run_code(code)
    assert (result.status, result.stderr) == ("ok", "")
    assert result.stdout == "b'127.0.0.1' b'bcher-kva' b'\\x82'\nTrue\n"


async def test_tracebacks_show_source_lines_of_the_standard_library(sandbox: Sandbox) -> None:
    result = await sandbox.run_code("import json\njson.loads('{')\n")
    assert result.error is not None and result.error.startswith("json.decoder.JSONDecodeError:")
    assert "return _default_decoder.decode(s)" in result.stderr


async def test_the_program_sees_nothing_the_sandbox_ran_before_it(sandbox: Sandbox) -> None:
    code = (
        "import linecache, sys\n"
        "def f(x):\n"
        "    return [sorted(k for k in linecache.cache if k.startswith('<')), sys.stdin.read()]\n"
    )
    result = await sandbox.run_tests(code, problem(io("seen", [0], [["<code>"], ""])))
    assert result.status == "ok", result.tests[0].actual


async def test_programs_and_their_subprocesses_get_only_the_safe_environment(
    sandbox: Sandbox,
) -> None:
    code = (
        "import os, subprocess\n"
        "print(sorted(os.environ))\n"
        "env = subprocess.run(['env'], capture_output=True, text=True).stdout\n"
        "print(sorted(line.split('=')[0] for line in env.splitlines()))\n"
    )
    result = await sandbox.run_code(code)
    names = str(sorted([*isolation.SAFE_ENV, "HOME", "PWD", "TMPDIR"]))
    assert result.stdout.splitlines() == [names, names], result.stderr


async def test_each_execution_gets_a_fresh_directory_that_is_removed(sandbox: Sandbox) -> None:
    code = "import os\nopen('state', 'w').write('x')\nprint(os.getcwd())\n"
    first = await sandbox.run_code(code)
    second = await sandbox.run_code("import os\nprint(os.listdir('.'))\n")
    assert second.stdout == "['solution.py']\n"  # its own file, nothing of the first
    if sandbox.isolation == "rlimit":
        assert not Path(first.stdout.strip()).exists()


async def test_concurrent_executions_all_complete(sandbox: Sandbox) -> None:
    p = problem(io("a", [5], 25))
    results = await asyncio.gather(
        *(sandbox.run_tests(f"def f(x):\n    return x * x + {i % 2}\n", p) for i in range(20))
    )
    assert [r.status for r in results] == ["ok", "failed"] * 10


def test_forcing_bwrap_where_it_is_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    isolation._bwrap_problem.cache_clear()
    try:
        with pytest.raises(SandboxError, match="bwrap"):
            Sandbox("bwrap")
    finally:
        isolation._bwrap_problem.cache_clear()


def test_auto_uses_the_builtin_isolation_where_bubblewrap_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    isolation._bwrap_problem.cache_clear()
    try:
        info = detect_isolation("auto")
    finally:
        isolation._bwrap_problem.cache_clear()
    assert (info.name, info.warning) == ("builtin", None)
    assert info.network_isolated and info.filesystem_isolated
    assert "namespace" in info.detail and "(no network)" in info.detail
    assert "landlock ABI" in info.detail


def test_no_isolation_at_all_is_refused_unless_rlimit_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    nothing = isolation.BuiltinLayers(problems=["no user+network namespace", "no Landlock"])
    monkeypatch.setattr(isolation, "builtin_layers", lambda: nothing)
    isolation._bwrap_problem.cache_clear()
    try:
        for choice in ("auto", "builtin"):
            with pytest.raises(SandboxError, match="apt-get install bubblewrap") as refused:
                Sandbox(choice)
            assert "\n" not in str(refused.value) and "--sandbox rlimit" in str(refused.value)
        assert Sandbox("rlimit").isolation == "rlimit"
    finally:
        isolation._bwrap_problem.cache_clear()


def test_rlimit_mode_says_it_has_no_network_isolation() -> None:
    info = detect_isolation("rlimit")
    assert "no network" in info.detail
    assert not info.network_isolated and not info.filesystem_isolated


@pytest.mark.parametrize("isolation_name", ["builtin", "rlimit"])
async def test_the_cpu_time_of_executions_counts_in_tracegens_children(
    isolation_name: str,
) -> None:
    """Once the sandbox is closed, what its executions used is in tracegen's
    ``RUSAGE_CHILDREN``, as for any child process: accounting and benchmarks rely on it."""
    import resource

    from tests.support.sandboxes import LIMITS

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children_cpu()
    async with Sandbox(isolation_name, limits=LIMITS) as box:
        burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n"
        result = await box.run_code(burn + "    pass\n")
    assert result.status == "ok", result.error
    assert children_cpu() - before >= 0.3
