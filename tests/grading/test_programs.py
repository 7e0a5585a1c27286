"""The judge of program problems: every shape of program, in Python and C++, gets its named
outcome under every isolation; a private test catches what the public one lets through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.programs import CPP, JAVA, OUTCOMES, PYTHON, SUM
from tests.support.sandboxes import EACH_ISOLATION
from tests.support.system_tools import NEEDS_GPP, NEEDS_JAVAC
from tracegen.generate.worker import CountingRunner
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.sandbox import Sandbox
from tracegen.sandbox.build_cache import BuildCache
from tracegen.sandbox.programs import Programs
from tracegen.schema import Comparison, Language, Outcome, Problem, ProgramLimits, TestCase

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EACH_ISOLATION)
async def judge(request: pytest.FixtureRequest) -> AsyncIterator[ProgramJudge]:
    async with Sandbox(request.param, concurrency=2) as sandbox:
        yield ProgramJudge(Programs(sandbox))


SLOW_SHAPES = {"busy", "sleep", "flood", "answer-when-killed"}
"""Shapes that take seconds (their limits run out twice: once in the batch, once alone)."""


@pytest.mark.parametrize(
    "shape",
    [pytest.param(s, marks=pytest.mark.slow) if s in SLOW_SHAPES else s for s in sorted(PYTHON)],
)
async def test_python_program_gets_its_outcome(judge: ProgramJudge, shape: str) -> None:
    result = await judge.judge(SUM, PYTHON[shape], "python")
    assert result.outcome == OUTCOMES[shape], (result.error, result.tests)
    assert (result.status == "ok") == (OUTCOMES[shape] == "accepted")


@pytest.mark.slow
@NEEDS_GPP
@pytest.mark.parametrize("shape", sorted(CPP))
async def test_cpp_program_gets_its_outcome(judge: ProgramJudge, shape: str) -> None:
    result = await judge.judge(SUM, CPP[shape], "cpp")
    assert result.outcome == OUTCOMES[shape], (result.error, result.tests)


@pytest.mark.slow
@NEEDS_JAVAC
@pytest.mark.parametrize("shape", sorted(JAVA))
async def test_java_program_gets_its_outcome(judge: ProgramJudge, shape: str) -> None:
    """Compiled once by javac, a JVM per test; its heap is the problem's memory limit (64 MB)."""
    result = await judge.judge(SUM, JAVA[shape], "java")
    if shape == "stack":  # a JVM's 16 MB stack filled, beside the JVM, may pass 64 MB first;
        # at its limit the kernel reclaims (and the JVM faults back) its code pages, which on a
        # busy machine may spend the CPU limit before the kill.
        assert result.outcome in ("runtime", "memory", "time"), (result.error, result.tests)
        return
    assert result.outcome == OUTCOMES[shape], (result.error, result.tests)
    assert (result.status == "ok") == (OUTCOMES[shape] == "accepted")
    if shape == "memory":
        assert (result.error or "").startswith("memory limit of 64 MB exceeded")


@pytest.mark.slow
@NEEDS_JAVAC
async def test_java_is_compiled_once_and_named_by_its_fence(judge: ProgramJudge) -> None:
    code = JAVA["accepted"] + "// once\n"
    before = judge.programs.compilations
    for _ in range(2):
        assert (await judge.judge(SUM, code)).status == "ok"  # Java by its main(String[])
    assert judge.programs.compilations == before + 1


@pytest.mark.slow
@NEEDS_JAVAC
async def test_a_jvm_that_cannot_start_is_an_error_never_the_programs_fault(
    tmp_path: Path,
) -> None:
    """A memory limit too small for any JVM: the sandbox's fault, said so, for a program
    built elsewhere (the same jar, from the disk cache), while javac, which has its own
    memory limit, still compiles there; a program that prints the JVM's words itself is
    still judged by its own run."""
    from tracegen.sandbox import SandboxLimits

    async with Sandbox("builtin") as sandbox:
        judge = ProgramJudge(Programs(sandbox, BuildCache(tmp_path / "builds")))
        assert (await judge.judge(SUM, JAVA["accepted"], "java")).outcome == "accepted"
        liar = await judge.judge(SUM, _JAVA_LIAR, "java")
        assert liar.outcome == "runtime", liar.error
    async with Sandbox("builtin", limits=SandboxLimits(memory_mb=16)) as sandbox:
        small = ProgramJudge(Programs(sandbox, BuildCache(tmp_path / "builds")))
        result = await small.judge(SUM, JAVA["accepted"], "java")
        assert small.programs.compilations == 0  # the jar built under the larger limit
        assert (result.outcome, result.error) == (
            "error",
            "the JVM cannot start under the sandbox's limits",
        )
        # javac is a JVM too, but a compile has its own memory limit, not the sandbox's.
        built = await small.programs.build(JAVA["accepted"] + "// anew\n", "java")
        assert built.failure is None and built.error is None, (built.failure, built.error)


_JAVA_LIAR = (
    "public class Main { public static void main(String[] a) { System.err.println("
    '"Error occurred during initialization of VM"); System.exit(1); } }\n'
)


async def test_hard_coded_public_output_is_caught_by_the_private_test(judge: ProgramJudge) -> None:
    result = await judge.judge(SUM, PYTHON["hard-coded"], "python")
    public, private = result.tests
    assert public.outcome == "accepted" and private.outcome == "wrong"
    assert private.expected is None and private.actual is None  # never shown


async def test_judging_stops_at_the_first_failure_unless_all_tests(judge: ProgramJudge) -> None:
    problem = SUM.model_copy(update={"tests": [*SUM.tests[::-1], SUM.tests[0]]})
    first = await judge.judge(problem, PYTHON["hard-coded"], "python")
    assert [t.outcome for t in first.tests] == ["wrong", "skipped", "skipped"]
    every = ProgramJudge(judge.programs, JudgeOptions(all_tests=True))
    result = await every.judge(problem, PYTHON["hard-coded"], "python")
    assert [t.outcome for t in result.tests] == ["wrong", "accepted", "accepted"]
    assert result.passed == 2 and result.total == 3


async def test_time_scale_lets_a_slow_program_through(judge: ProgramJudge) -> None:
    slow = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n"
        "    pass\nprint(5)\n"
    )
    problem = SUM.model_copy(
        update={"limits": ProgramLimits(time_s=0.3, memory_mb=64), "tests": SUM.tests[:1]}
    )
    assert (await judge.judge(problem, slow, "python")).outcome == "time"
    scaled = ProgramJudge(judge.programs, JudgeOptions(time_scale=4))
    assert (await scaled.judge(problem, slow, "python")).outcome == "accepted"


async def test_input_and_output_files(judge: ProgramJudge) -> None:
    problem = SUM.model_copy(update={"input_file": "input.txt", "output_file": "output.txt"})
    code = (
        "a, b = map(int, open('input.txt').read().split())\n"
        "open('output.txt', 'w').write(str(a + b))\nprint('ignored')\n"
    )
    assert (await judge.judge(problem, code, "python")).outcome == "accepted"
    assert (await judge.judge(problem, PYTHON["accepted"], "python")).outcome == "runtime"


FUNCTIONAL = Problem(
    id="two-sum",
    prompt="Return the indices of the two numbers that add up to target.",
    entry_point="Solution.twoSum",
    tests=[
        TestCase(name="t1", kind="functional", args=[[2, 7, 11, 15], 9], expected=[0, 1]),
        TestCase(name="t2", kind="functional", args=[[3, 2, 4], 6], expected=[1, 2], private=True),
    ],
)


async def test_functional_tests_call_solution_method(judge: ProgramJudge) -> None:
    right = (
        "class Solution:\n    def twoSum(self, nums, target):\n        print('debugging')\n"
        "        seen = {}\n        for i, n in enumerate(nums):\n"
        "            if target - n in seen:\n                return (seen[target - n], i)\n"
        "            seen[n] = i\n\nif __name__ == '__main__':\n    raise SystemExit(1)\n"
    )
    assert (await judge.judge(FUNCTIONAL, right, "python")).outcome == "accepted"
    wrong = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    result = await judge.judge(FUNCTIONAL, wrong, "python")
    assert [t.outcome for t in result.tests] == ["accepted", "wrong"]


CHECKER = """\
import sys
given, expected, actual = (open(p).read().split() for p in sys.argv[1:4])
n = int(given[0])
try:
    a, b = map(int, actual)
except ValueError:
    print(0)
    raise SystemExit
print(1 if a + b == n and a > 0 and b > 0 else 0)
"""


async def test_checker_accepts_any_valid_answer(judge: ProgramJudge) -> None:
    """open-r1/codeforces' protocol: ``checker input correct_output solution_output``."""
    problem = Problem(
        id="split",
        prompt="Print two positive integers adding up to n.",
        compare=Comparison(rule="checker", checker=CHECKER),
        tests=[TestCase(name="t", kind="stdio", input="10\n", expected="5 5\n")],
    )
    for code, outcome in [
        ("n = int(input())\nprint(1, n - 1)\n", "accepted"),
        ("n = int(input())\nprint(n // 2, n - n // 2)\n", "accepted"),
        ("print(0, 10)\n", "wrong"),
        ("print('many words here')\n", "wrong"),
    ]:
        assert (await judge.judge(problem, code, "python")).outcome == outcome, code


async def test_testlib_checker_protocol(judge: ProgramJudge) -> None:
    checker = (
        "import sys\ninp, out, ans = sys.argv[1:4]\n"
        "raise SystemExit(0 if open(out).read().split() == open(ans).read().split() else 1)\n"
    )
    problem = SUM.model_copy(
        update={"compare": Comparison(rule="checker", checker=checker, checker_protocol="testlib")}
    )
    assert (await judge.judge(problem, PYTHON["accepted"], "python")).outcome == "accepted"
    assert (await judge.judge(problem, PYTHON["wrong"], "python")).outcome == "wrong"
    broken = SUM.model_copy(
        update={
            "compare": Comparison(
                rule="checker", checker="raise SystemExit(3)", checker_protocol="testlib"
            )
        }
    )
    result = await judge.judge(broken, PYTHON["accepted"], "python")
    assert result.outcome == "error" and result.status == "error"  # never `wrong`


async def test_a_python_program_is_built_once(judge: ProgramJudge) -> None:
    code = PYTHON["accepted"] + "# built once\n"
    before = judge.programs.compilations
    for _ in range(3):
        assert (await judge.judge(SUM, code, "python")).status == "ok"
    assert judge.programs.compilations == before + 1


@pytest.mark.slow
@NEEDS_GPP
async def test_cpp_is_compiled_once_per_source(judge: ProgramJudge) -> None:
    code = CPP["accepted"] + "// once\n"
    before = judge.programs.compilations
    for _ in range(3):
        assert (await judge.judge(SUM, code, "cpp")).status == "ok"
    assert judge.programs.compilations == before + 1


async def test_functional_values_compare_as_livecodebench_on_its_rows(judge: ProgramJudge) -> None:
    """LiveCodeBench compares ``prediction == expected`` (after tuples become lists)."""
    half = Problem(
        id="half",
        prompt="Return half of n.",
        entry_point="Solution.half",
        compare=Comparison(rule="lines"),
        tests=[TestCase(name="t", kind="functional", args=[1], expected=0.5)],
    )
    close = "class Solution:\n    def half(self, n):\n        return 0.5000001\n"
    exact = "class Solution:\n    def half(self, n):\n        return n / 2\n"
    assert (await judge.judge(half, exact, "python")).outcome == "accepted"
    assert (await judge.judge(half, close, "python")).outcome == "wrong"


async def test_an_input_larger_than_the_sandbox_allows_is_an_error_not_the_programs() -> None:
    from tracegen.sandbox import SandboxLimits

    big = SUM.model_copy(
        update={"tests": [TestCase(name="big", kind="stdio", input="1 " * (1 << 20), expected="")]}
    )
    async with Sandbox("builtin", limits=SandboxLimits(file_size_mb=1)) as sandbox:
        result = await ProgramJudge(Programs(sandbox)).judge(big, PYTHON["accepted"], "python")
    assert result.outcome == "error" and "file size limit" in (result.error or "")


MANY = SUM.model_copy(update={"tests": SUM.tests * 10})


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", PYTHON["accepted"]),
        pytest.param("cpp", CPP["accepted"], marks=[pytest.mark.slow, NEEDS_GPP]),
    ],
)
async def test_a_programs_tests_run_in_one_execution(
    judge: ProgramJudge, language: str, code: str
) -> None:
    counting = CountingRunner(judge.programs.sandbox)  # type: ignore[arg-type]
    programs = Programs(counting)
    await programs.build(code, language)
    counting.executions = 0
    batched = ProgramJudge(programs, JudgeOptions(batch=True))
    result = await batched.judge(MANY, code, language)
    assert result.status == "ok" and result.passed == 20
    assert counting.executions == 1


KILLS_ITS_PARENT = (
    "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
    "os.kill(os.getppid(), signal.SIGKILL)\n"
)


THREE = SUM.model_copy(update={"tests": [*SUM.tests, SUM.tests[0]]})


async def outcomes_alone_and_batched(
    judge: ProgramJudge, code: str, language: Language
) -> tuple[list[Outcome | None], list[Outcome | None]]:
    """Each test's outcome of ``code`` on `THREE`, every test run: in an execution of its
    own, and in executions of many tests."""
    outcomes: list[list[Outcome | None]] = []
    for batch in (False, True):
        judged = ProgramJudge(judge.programs, JudgeOptions(batch=batch, all_tests=True))
        outcomes.append([t.outcome for t in (await judged.judge(THREE, code, language)).tests])
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize(
    "shape",
    [
        "accepted",
        "hard-coded",
        "crash",
        "exit",
        pytest.param("busy", marks=pytest.mark.slow),
        pytest.param("memory", marks=pytest.mark.slow),
    ],
)
async def test_verdicts_are_the_same_with_and_without_one_execution_per_program(
    judge: ProgramJudge, shape: str
) -> None:
    alone, batched = await outcomes_alone_and_batched(judge, PYTHON[shape], "python")
    assert alone == batched


async def test_a_program_that_kills_the_batch_driver_is_judged_alone(judge: ProgramJudge) -> None:
    alone = ProgramJudge(judge.programs, JudgeOptions(batch=False))
    batched = ProgramJudge(judge.programs, JudgeOptions(batch=True))
    expected = (await alone.judge(THREE, KILLS_ITS_PARENT, "python")).outcome
    assert (await batched.judge(THREE, KILLS_ITS_PARENT, "python")).outcome == expected


DOUBLES = Problem(
    id="doubles",
    prompt="Read n; print 2n.",
    language="python",
    tests=[
        TestCase(name="a", kind="stdio", input="1\n", expected="2\n"),
        TestCase(name="b", kind="stdio", input="5\n", expected="10\n", private=True),
    ],
)
LEAVES_A_FILE = (
    "n = int(input())\n"
    "with open('scratch.txt', 'a') as f:\n    f.write(f'{2 * n}\\n')\n"
    "print(open('scratch.txt').readline().strip())\n"
)
"""Right alone on every test; wrong on a later test if it finds an earlier test's file."""


async def test_what_one_test_leaves_behind_never_reaches_the_next(judge: ProgramJudge) -> None:
    result = await judge.judge(DOUBLES, LEAVES_A_FILE, "python")
    assert result.outcome == "accepted", [(t.outcome, t.error) for t in result.tests]


@pytest.mark.slow
@NEEDS_GPP
@pytest.mark.parametrize("shape", sorted(CPP))
async def test_cpp_verdicts_are_the_same_with_and_without_one_execution(
    judge: ProgramJudge, shape: str
) -> None:
    alone, batched = await outcomes_alone_and_batched(judge, CPP[shape], "cpp")
    assert alone == batched


async def test_many_tests_are_run_in_executions_of_at_most_a_hundred(judge: ProgramJudge) -> None:
    counting = CountingRunner(judge.programs.sandbox)  # type: ignore[arg-type]
    programs = Programs(counting)
    await programs.build(PYTHON["accepted"], "python")
    counting.executions = 0
    problem = SUM.model_copy(update={"tests": SUM.tests * 101})
    batched = ProgramJudge(programs, JudgeOptions(batch=True))
    result = await batched.judge(problem, PYTHON["accepted"], "python")
    assert result.status == "ok" and result.passed == 202
    assert counting.executions == 3


_JAVA_FILES = (
    "import java.io.*;\nimport java.util.*;\npublic class Main {\n"
    "  public static void main(String[] a) throws Exception {\n"
    '    Scanner s = new Scanner(new File("input.txt"));\n'
    '    PrintWriter w = new PrintWriter("output.txt");\n'
    "    w.println(s.nextLong() + s.nextLong());\n    w.close();\n  }\n}\n"
)
_JAVA_CHECKER = (  # open-r1's protocol: input, expected, actual; prints 1 when right
    "import java.nio.file.*;\npublic class Check {\n"
    "  public static void main(String[] a) throws Exception {\n"
    "    String want = Files.readString(Path.of(a[1])).trim();\n"
    "    String got = Files.readString(Path.of(a[2])).trim();\n"
    '    System.out.println(want.equals(got) ? "1" : "0");\n  }\n}\n'
)


@pytest.mark.slow
@NEEDS_JAVAC
async def test_java_reads_and_writes_named_files_and_checks_as_a_checker(
    judge: ProgramJudge,
) -> None:
    files = SUM.model_copy(update={"input_file": "input.txt", "output_file": "output.txt"})
    assert (await judge.judge(files, _JAVA_FILES, "java")).outcome == "accepted"
    assert (await judge.judge(files, JAVA["accepted"], "java")).outcome == "runtime"  # no stdin
    checked = SUM.model_copy(
        update={
            "compare": Comparison(rule="checker", checker=_JAVA_CHECKER, checker_language="java")
        }
    )
    assert (await judge.judge(checked, PYTHON["accepted"], "python")).outcome == "accepted"
    assert (await judge.judge(checked, PYTHON["hard-coded"], "python")).outcome == "wrong"
