"""Judging program problems: a 20-test problem in Python and C++, beside the same binary run bare.

One run, side by side, on the same 20 tests (a sum of 2,000 numbers each):

- **bare**: the program run directly (``subprocess`` with the test's input on stdin), the C++
  binary compiled once outside any sandbox, the Python program by the same interpreter;
- **tracegen**: the same program judged by `ProgramJudge` in the sandbox, its build cached
  (``cached``), and, for C++, built afresh each round (``compiled``: a new source each time).

Per test: wall milliseconds, and CPU milliseconds of every process involved (for tracegen, the
sandbox's processes and tracegen's own; for bare, the children). The sandbox's cost per test
is tracegen's CPU per test minus bare CPU per test, which the 5 ms target is about.

``python benchmarks/programs.py [--rounds 5] [--sandbox builtin]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

TESTS = 20
TARGET_MS = 5.0
BATCH = False
CPP = (
    '#include <cstdio>\nint main(){int n;long long s=0,x;if(scanf("%d",&n)!=1)return 1;'
    'for(int i=0;i<n;i++){scanf("%lld",&x);s+=x;}printf("%lld\\n",s);}\n'
)
PYTHON = "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\n"


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


def _tree_cpu(root: int) -> float:
    """CPU seconds of every live descendant of ``root`` and of the children they reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append((int(entry.name), fields))
    total, todo = 0.0, [root]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15]) / tick
            todo.append(pid)
    return total


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return own + _tree_cpu(os.getpid())


def bare(command: list[str], problem: Any, rounds: int) -> tuple[float, float]:
    """Wall and CPU ms per test of ``command`` run directly."""
    inputs = [t.input.encode() for t in problem.tests]
    cpu, started = _cpu(), time.perf_counter()
    for _ in range(rounds):
        for given in inputs:
            done = subprocess.run(command, input=given, capture_output=True, check=True)
            assert done.stdout
    n = rounds * len(inputs)
    return (time.perf_counter() - started) / n * 1000, (_cpu() - cpu) / n * 1000


async def judged(
    isolation: str, problem: Any, code: str, language: str, rounds: int, fresh: bool
) -> tuple[float, float]:
    """Wall and CPU ms per test of tracegen judging ``code`` (``fresh``: a new source, so a
    new compilation, every round)."""
    from tracegen.grading.programs import JudgeOptions, ProgramJudge
    from tracegen.sandbox import Sandbox
    from tracegen.sandbox.programs import Programs

    async with Sandbox(isolation, concurrency=1) as sandbox:
        judge = ProgramJudge(Programs(sandbox), JudgeOptions(all_tests=True, batch=BATCH))
        warm = await judge.judge(problem, code, language)  # the zygote and the build warmed
        assert warm.status == "ok", warm
        cpu, started = _cpu(), time.perf_counter()
        for r in range(rounds):
            source = f"{code}// round {r} {time.time_ns()}\n" if fresh else code
            result = await judge.judge(problem, source, language)
            assert result.status == "ok", result
        n = rounds * len(problem.tests)
        return (time.perf_counter() - started) / n * 1000, (_cpu() - cpu) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sandbox", default="builtin")
    args = parser.parse_args()
    problem = _problem()
    table = Table(title=f"A {TESTS}-test problem, {args.rounds} rounds, sandbox {args.sandbox}")
    for column in ("language", "how", "wall ms/test", "CPU ms/test", "sandbox CPU ms/test"):
        table.add_column(column, justify="right" if "ms" in column else "left")
    with tempfile.TemporaryDirectory() as work:
        rows: list[tuple[str, str, float, float]] = []
        py = Path(work, "main.py")
        py.write_text(PYTHON)
        rows.append(("python", "bare", *bare([sys.executable, str(py)], problem, args.rounds)))
        rows.append(
            ("python", "tracegen", *asyncio.run(
                judged(args.sandbox, problem, PYTHON, "python", args.rounds, fresh=False)))
        )  # fmt: skip
        if shutil.which("g++"):
            src, binary = Path(work, "main.cpp"), Path(work, "main")
            src.write_text(CPP)
            subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(binary), str(src)], check=True)
            rows.append(("cpp", "bare", *bare([str(binary)], problem, args.rounds)))
            for how, fresh in (("tracegen, cached", False), ("tracegen, compiled", True)):
                measured = asyncio.run(
                    judged(args.sandbox, problem, CPP, "cpp", args.rounds, fresh=fresh)
                )
                rows.append(("cpp", how, *measured))
    bare_cpu = {lang: cpu for lang, how, _, cpu in rows if how == "bare"}
    for lang, how, wall, cpu in rows:
        extra = "" if how == "bare" else f"{cpu - bare_cpu[lang]:.2f}"
        table.add_row(lang, how, f"{wall:.2f}", f"{cpu:.2f}", extra)
    Console().print(table)
    print(f"target: the sandbox costs at most {TARGET_MS} ms of CPU per test (cached build)")


if __name__ == "__main__":
    main()
