"""Judging program problems: a 20-test problem in Python, C++ and Java, beside the same program
run bare.

One run, side by side, on the same 20 tests (a sum of 2,000 numbers each):

- **bare**: the program run directly (``subprocess`` with the test's input on stdin), the C++
  binary and the Java classes compiled once outside any sandbox, the Python program by the
  same interpreter;
- **tracegen**: the same program judged by `ProgramJudge` in the sandbox, its build cached:
  each test in an execution of its own (``per test``, the default), or every test in one
  execution (``batch``, `JudgeOptions(batch=True)`); for C++ also built afresh each round
  (``compiled``: a new source each time).

Per test: wall milliseconds, CPU milliseconds and minor page faults of every process involved
(for tracegen, the sandbox's processes and tracegen's own; for bare, the children and this
process's spawning of them). The sandbox's cost per test is tracegen's CPU per test minus
bare CPU per test, which the 5 ms target is about.

``python benchmarks/programs.py [--rounds 5] [--sandbox builtin,bwrap] [--no-java]``
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import all_usage

TESTS = 20
TARGET_MS = 5.0
CPP = (
    '#include <cstdio>\nint main(){int n;long long s=0,x;if(scanf("%d",&n)!=1)return 1;'
    'for(int i=0;i<n;i++){scanf("%lld",&x);s+=x;}printf("%lld\\n",s);}\n'
)
PYTHON = "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\n"
JAVA = (
    "import java.io.*;\nimport java.util.*;\npublic class Main {\n"
    "  public static void main(String[] a) throws IOException {\n"
    "    BufferedReader r = new BufferedReader(new InputStreamReader(System.in));\n"
    "    int n = Integer.parseInt(r.readLine().trim());\n"
    "    StringTokenizer t = new StringTokenizer(r.readLine());\n"
    "    long s = 0;\n    for (int i = 0; i < n; i++) s += Long.parseLong(t.nextToken());\n"
    "    System.out.println(s);\n  }\n}\n"
)


def _problem() -> Any:
    from tracegen.schema import Problem, ProgramLimits, TestCase

    tests = []
    for t in range(TESTS):
        numbers = [(i * 7919 + t) % 100_003 for i in range(2000)]
        given = f"{len(numbers)}\n{' '.join(map(str, numbers))}\n"
        tests.append(
            TestCase(name=f"t{t}", kind="stdio", input=given, expected=f"{sum(numbers)}\n")
        )
    return Problem(id="sum", prompt="", limits=ProgramLimits(time_s=2, memory_mb=256), tests=tests)


Measured = tuple[float, float, float]
"""Wall ms, CPU ms and page faults per test."""


def _per_test(started: float, usage: tuple[float, int], n: int) -> Measured:
    cpu, faults = all_usage()
    wall = (time.perf_counter() - started) / n * 1000
    return wall, (cpu - usage[0]) / n * 1000, (faults - usage[1]) / n


def bare(command: list[str], problem: Any, rounds: int) -> Measured:
    """Per test, ``command`` run directly."""
    inputs = [t.input.encode() for t in problem.tests]
    usage, started = all_usage(), time.perf_counter()
    for _ in range(rounds):
        for given in inputs:
            done = subprocess.run(command, input=given, capture_output=True, check=True)
            assert done.stdout
    return _per_test(started, usage, rounds * len(inputs))


async def judged(
    isolation: str, problem: Any, code: str, language: str, rounds: int, how: str
) -> Measured:
    """Per test, tracegen judging ``code``: ``how`` is ``per test``, ``batch`` or
    ``compiled`` (a new source, so a new compilation, every round)."""
    from tracegen.grading.programs import JudgeOptions, ProgramJudge
    from tracegen.sandbox import Sandbox
    from tracegen.sandbox.programs import Programs

    async with Sandbox(isolation, concurrency=1) as sandbox:
        options = JudgeOptions(all_tests=True, batch=how == "batch")
        judge = ProgramJudge(Programs(sandbox), options)
        warm = await judge.judge(problem, code, language)  # the zygote and the build warmed
        assert warm.status == "ok", warm
        usage, started = all_usage(), time.perf_counter()
        for r in range(rounds):
            source = f"{code}// round {r} {time.time_ns()}\n" if how == "compiled" else code
            result = await judge.judge(problem, source, language)
            assert result.status == "ok", result
        return _per_test(started, usage, rounds * len(problem.tests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sandbox", default="builtin", help="comma-separated isolations")
    parser.add_argument("--no-java", action="store_true", help="leave Java out")
    args = parser.parse_args()
    problem = _problem()
    rows: list[tuple[str, str, str, Measured]] = []
    isolations = args.sandbox.split(",")
    with tempfile.TemporaryDirectory() as work:
        py = Path(work, "main.py")
        py.write_text(PYTHON)
        languages: list[tuple[str, str, list[str], list[str]]] = [
            ("python", PYTHON, [sys.executable, str(py)], ["per test", "batch"])
        ]
        if shutil.which("g++"):
            src, binary = Path(work, "main.cpp"), Path(work, "main")
            src.write_text(CPP)
            subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(binary), str(src)], check=True)
            languages.append(("cpp", CPP, [str(binary)], ["per test", "batch", "compiled"]))
        if shutil.which("javac") and not args.no_java:
            Path(work, "Main.java").write_text(JAVA)
            subprocess.run(["javac", "-d", work, str(Path(work, "Main.java"))], check=True)
            java = ["java", "-XX:+UseSerialGC", "-Xss16m", "-cp", work, "Main"]
            languages.append(("java", JAVA, java, ["per test"]))
        for language, code, command, hows in languages:
            rows.append((language, "bare", "", bare(command, problem, args.rounds)))
            for isolation in isolations:
                for how in hows:
                    rounds = max(1, args.rounds // 5) if language == "java" else args.rounds
                    measured = asyncio.run(judged(isolation, problem, code, language, rounds, how))
                    rows.append((language, f"tracegen, {how}", isolation, measured))
    table = Table(title=f"A {TESTS}-test problem, {args.rounds} rounds")
    columns = ("language", "how", "sandbox", "wall ms", "CPU ms", "faults", "sandbox CPU ms")
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:3] else "right")
    bare_cpu = {lang: m[1] for lang, how, _, m in rows if how == "bare"}
    for lang, how, isolation, (wall, cpu, faults) in rows:
        extra = "" if how == "bare" else f"{cpu - bare_cpu[lang]:.2f}"
        table.add_row(lang, how, isolation, f"{wall:.2f}", f"{cpu:.2f}", f"{faults:.0f}", extra)
    Console().print(table)
    print(
        "per test; sandbox CPU ms = tracegen's CPU ms - bare CPU ms; target: at most "
        f"{TARGET_MS} ms of CPU per test (cached build)"
    )


if __name__ == "__main__":
    main()
