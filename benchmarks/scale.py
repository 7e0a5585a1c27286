"""What each way of spreading a run costs: local, 3 shards + merge, Ray with 1 and 2 nodes.

The loopback Ollama server (in this process) answers every request after a fixed latency,
at most P at a time. Each case runs the same ``markers`` episodes (one model turn, one
sandboxed test run) with P episodes in flight in all, as child processes:

- ``local``: one ``tracegen run --concurrency P``;
- ``3 shards``: three ``tracegen run --shard I/3`` at once (like three array tasks), each
  with a third of P, then ``tracegen merge``;
- ``ray, N node(s)``: ``tracegen run --executor ray`` on a Ray instance of this machine
  (``ray.cluster_utils.Cluster``: a head without sandboxes, N simulated nodes offering
  ``tracegen_sandbox``, which here share the same cores).

Printed per case: the wall time from start to exit (start-up included: Ray's is seconds),
the steady rate (episodes/s between the first and last trace written), executions/s at that
rate, and the CPU time the driver process(es) used per episode over that same span (read
from /proc: the process itself, not its sandboxes or Ray's actors; start-up left out) —
what bounds how many episodes/s one driver absorbs.

    python benchmarks/scale.py             # 200 episodes, 0.2 s latency, P = 8
    python benchmarks/scale.py --quick     # 60 episodes
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from benchmarks.throughput import ANSWER, write_problems  # noqa: E402
from tests.support.fake_ollama import FakeOllama  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Case:
    name: str
    wall_s: float
    episodes: int
    steady: float
    executions: int
    driver_cpu_s: float
    """CPU of the driver process(es) between the first and the last trace written."""


def _cpu_s(pid: int) -> float | None:
    """utime + stime of the process itself (not its children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


Samples = list[tuple[float, float]]
"""(time.time(), CPU seconds so far) of one process, every 50 ms."""


def _drive(commands: list[list[str]], env: dict[str, str]) -> tuple[float, list[Samples], str]:
    """Run the commands at once; (wall seconds, each driver's CPU samples, their stdout)."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    samples: list[Samples] = [[] for _ in procs]
    while any(p.poll() is None for p in procs):
        for p, series in zip(procs, samples, strict=True):
            cpu = _cpu_s(p.pid)
            if cpu is not None:
                series.append((time.time(), cpu))
        time.sleep(0.05)
    wall = time.perf_counter() - started
    out = ""
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{p.args} failed ({p.returncode}):\n{stderr}")
        out += stdout
    return wall, samples, out


def _at(series: Samples, moment: float) -> float:
    """The CPU seconds a process had used by ``moment`` (the last sample before it)."""
    before = [cpu for t, cpu in series if t <= moment]
    return before[-1] if before else 0.0


def _traces(*paths: Path) -> list[float]:
    """When each trace was written (its ``created_at``), in order."""
    import orjson

    return sorted(
        datetime.fromisoformat(orjson.loads(line)["created_at"]).timestamp()
        for p in paths
        for line in p.read_bytes().splitlines()
    )


def _executions(stdout: str) -> int:
    return sum(int(n) for n in re.findall(r"executions\s+│ (\d+)", stdout))


def run_cases(url: str, problems: Path, samples: int, parallel: int, tmp: Path) -> list[Case]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    tracegen = [sys.executable, "-m", "tracegen"]

    def run(out: Path, concurrency: int, *extra: str) -> list[str]:
        return [
            *tracegen,
            "run",
            "--mode",
            "markers",
            "--model",
            "test-model",
            "--host",
            url,
            "--problems",
            str(problems),
            "--num-samples",
            str(samples),
            "--sandbox",
            "rlimit",
            "--concurrency",
            str(concurrency),
            "-o",
            str(out),
            *extra,
        ]

    cases: list[Case] = []

    def measure(name: str, commands: list[list[str]], outputs: Callable[[], list[Path]]) -> None:
        wall, samples, stdout = _drive(commands, env)
        times = _traces(*outputs())
        first, last = times[0], times[-1]
        cpu = sum(_at(s, last) - _at(s, first) for s in samples)
        steady = (len(times) - 1) / (last - first)
        cases.append(Case(name, wall, len(times), steady, _executions(stdout), cpu))

    local = tmp / "local" / "traces.jsonl"
    measure("local", [run(local, parallel)], lambda: [local])

    sharded = tmp / "shards" / "traces.jsonl"
    third = -(-parallel // 3)
    shards = [run(sharded, third, "--shard", f"{i}/3") for i in range(3)]
    merged = tmp / "shards" / "merged.jsonl"
    started = time.perf_counter()
    measure("3 shards", shards, lambda: list(sharded.parent.glob("traces-*-of-00003.jsonl")))
    merge = subprocess.run(
        [*tracegen, "merge", str(merged), str(sharded.parent / "traces-*-of-00003.jsonl")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "3 of 3 merged" in merge.stdout, merge.stdout
    cases[-1].wall_s = time.perf_counter() - started

    ray_tmp = Path(tempfile.mkdtemp(prefix="tgbench", dir="/tmp"))
    (ray_tmp / "ray").mkdir()
    os.environ["RAY_TMPDIR"] = env["RAY_TMPDIR"] = str(ray_tmp)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20},
    )
    try:
        cluster.add_node(num_cpus=2, resources={"tracegen_sandbox": 1})
        one = tmp / "ray1" / "traces.jsonl"
        address = ["--executor", "ray", "--ray-address", cluster.address]
        measure("ray, 1 node", [run(one, parallel, *address)], lambda: [one])
        cluster.add_node(num_cpus=1, resources={"tracegen_sandbox": 1})
        two = tmp / "ray2" / "traces.jsonl"
        measure("ray, 2 nodes", [run(two, parallel, *address)], lambda: [two])
    finally:
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--parallel", type=int, default=8, help="P")
    args = parser.parse_args()
    samples = 3 if args.quick else 5
    problems_count = 20 if args.quick else 40
    with (
        tempfile.TemporaryDirectory() as name,
        FakeOllama(parallel=args.parallel, latency_s=args.latency) as server,
    ):
        tmp = Path(name)
        problems = tmp / "problems.jsonl"
        write_problems(problems, problems_count)
        server.set_responder(lambda path, body: ANSWER)
        cases = run_cases(server.url, problems, samples, args.parallel, tmp)
    bound = args.parallel / args.latency
    print(
        f"{problems_count * samples} markers episodes, latency {args.latency:g} s, "
        f"P = {args.parallel} (bound {bound:g} episodes/s), 2 shared cores"
    )
    header = (
        f"{'case':<14} {'wall s':>7} {'episodes':>8} {'steady ep/s':>12} {'ratio':>6} "
        f"{'exec/s':>7} {'driver CPU ms/ep':>17}"
    )
    print(header)
    print("-" * len(header))
    for c in cases:
        print(
            f"{c.name:<14} {c.wall_s:>7.1f} {c.episodes:>8} {c.steady:>12.1f} "
            f"{c.steady / bound:>6.2f} {c.steady * c.executions / c.episodes:>7.1f} "
            f"{1000 * c.driver_cpu_s / (c.episodes - 1):>17.1f}"
        )


if __name__ == "__main__":
    main()
