"""What scale-out costs the driver: choosing an actor and recording an episode, at 10, 100
and 1,000 stand-in actors, now and with the algorithm of the previous release; and (with
``--paths``) each way of spreading a run end to end.

Stand-in actors (the default): the Ray executor's own code (`Actors`, `RayExecutor`,
`Recorder`, the run files) drives N stand-ins for `EpisodeActor` handles. A stand-in pickles
what the driver sends, as Ray does, and answers each episode with a pickled ``markers``
trace (one model turn, one test run) at once, so the process's CPU is the driver's own:

- **actor choice**: one episode's acquire and release of an actor, with every actor
  holding half its share in flight;
- **driver CPU per episode**: a whole run of episodes through `RayExecutor.execute`, CPU
  time of this process per episode (what Ray's own call machinery adds is not in it);
  episodes/s per driver core is its inverse.

"previous" keeps the previous release's choice (every actor's share summed for every
candidate, each release waking every waiter) and payload (the whole settings and system
prompt pickled with each episode), copied here as the baseline. The targets are printed
with whether each is met.

``--paths``: the loopback Ollama server (in this process) answers every request after a
fixed latency, at most P at a time. Each case runs the same ``markers`` episodes with P
episodes in flight in all, as child processes:

- ``local``: one ``tracegen run --concurrency P``;
- ``3 shards``: three ``tracegen run --shard I/3`` at once (like three array tasks), each
  with a third of P, then ``tracegen merge``;
- ``ray, N node(s)``: ``tracegen run --executor ray`` on a Ray instance of this machine
  (``ray.cluster_utils.Cluster``: a head without sandboxes, N simulated nodes offering
  ``tracegen_sandbox``, which here share the same cores).

Printed per case: the wall time from start to exit (start-up included: Ray's is seconds),
the steady rate (episodes/s between the first and last trace written), executions/s at that
rate, and the CPU time the driver process(es) used per episode over that same span (read
from /proc: the process itself, not its sandboxes or Ray's actors; start-up left out).

    python benchmarks/scale.py             # stand-in actors: 10, 100, 1,000
    python benchmarks/scale.py --quick     # fewer episodes
    python benchmarks/scale.py --paths     # local, shards, Ray: 200 episodes, 0.2 s, P = 8
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import math
import os
import pickle
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from benchmarks.common import ADD_ANSWER, write_add_problems  # noqa: E402
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
    per_call: float | None = None
    """Ray: episodes back per call to an actor (from the summary)."""

    @property
    def driver_ms(self) -> float:
        """Driver CPU per episode over the steady span."""
        return 1000 * self.driver_cpu_s / (self.episodes - 1)


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


def _per_call(stdout: str) -> float | None:
    found = re.search(r"([\d.]+) episodes back per call", stdout)
    return float(found.group(1)) if found else None


def run_cases(url: str, problems: Path, samples: int, parallel: int, tmp: Path) -> list[Case]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["COLUMNS"] = "200"  # the summary's rows unwrapped, to be read back
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
        case = Case(name, wall, len(times), steady, _executions(stdout), cpu, _per_call(stdout))
        cases.append(case)

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


# ---------------------------------------------------------------- stand-in actors

ACTORS = (10, 100, 1000)
TARGET_EPISODE_MS = 2.0
TARGET_CHOICE_US = 50.0
TARGET_RATE = 500.0


class StandInMethod:
    """``handle.run`` of the previous release: ``remote(*args)`` pickles the arguments (as
    Ray does on the driver) and answers at once with a pickled result, read back when
    awaited."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        pickle.dumps(args, protocol=5)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(pickle.loads(self.answer))
        return future


class StandInExchange(StandInMethod):
    """``handle.exchange``: a batch of episodes as the driver encodes it, each answered at
    once, all in one answer encoded as an actor encodes it (read back when awaited)."""

    def __init__(self, answer: bytes) -> None:
        from tracegen.generate.ray_executor import encode_results

        super().__init__(answer)
        # the actor's own work (dumping the trace) done once, here
        ((_, line, *rest),) = pickle.loads(encode_results([("", pickle.loads(answer))]))
        self.line, self.rest = line, rest

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        from tracegen.generate.ray_executor import decode_batch

        blob, _linger = args
        pickle.dumps(args, protocol=5)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        wire = [(item[2], self.line, *self.rest) for item in decode_batch(blob)]
        answer = pickle.dumps(wire, protocol=pickle.HIGHEST_PROTOCOL)
        future.set_result(pickle.loads(pickle.dumps(answer, protocol=5)))
        return future


class StandInHandle:
    def __init__(self, answer: bytes) -> None:
        self.run = StandInMethod(answer)
        self.exchange = StandInExchange(answer)


class PreviousActors:
    """The previous release's actor choice, kept here only as the baseline: every live
    actor's share summed for every candidate, every release waking every waiter."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.actors: list[Any] = []
        self.in_flight: dict[int, int] = {}
        self._changed = asyncio.Condition()

    @property
    def alive(self) -> list[Any]:
        return [a for a in self.actors if a.alive]

    def join(self, actor: Any) -> None:
        self.actors.append(actor)
        self.in_flight[id(actor)] = 0

    def share(self, actor: Any) -> int:
        cpus = sum(a.cpus for a in self.alive) or 1
        return max(1, math.ceil(self.slots * actor.cpus / cpus))

    async def acquire(self) -> Any:
        async with self._changed:
            while True:
                free = [a for a in self.alive if self.in_flight[id(a)] < self.share(a)]
                if free:
                    actor = min(free, key=lambda a: self.in_flight[id(a)] / self.share(a))
                    self.in_flight[id(actor)] += 1
                    return actor
                await self._changed.wait()

    async def release(self, actor: Any) -> None:
        async with self._changed:
            self.in_flight[id(actor)] -= 1
            self._changed.notify_all()


def _actor(number: int, answer: bytes) -> Any:
    from tracegen.generate.ray_executor import _Actor

    node = f"{number:056x}"
    return _Actor(StandInHandle(answer), node, f"10.0.{number // 256}.{number % 256}", 1, number)


def _answer() -> bytes:
    from tests.support.traces import markers_trace

    from tracegen.generate.ray_executor import Result

    trace = markers_trace(0, problem_id="stand-in")  # no key of the plan: nothing is skipped
    return pickle.dumps(Result(trace, None, 0, 1), protocol=5)


def choice_us(count: int, previous: bool, budget_s: float) -> float:
    """Microseconds of CPU per acquire + release at ``count`` actors, half of each share
    in flight."""
    from tracegen.config import RunSettings
    from tracegen.generate.ray_executor import Actors, RunParts

    answer = _answer()
    slots = 4 * count

    async def measure() -> float:
        if previous:
            chooser: Any = PreviousActors(slots)
        else:
            parts = RunParts(RunSettings().generation(), "", "")
            chooser = Actors(RunSettings(), parts, slots, warn=print)
        for n in range(count):
            chooser.join(_actor(n + 1, answer))
        held = collections.deque([await chooser.acquire() for _ in range(slots // 2)])

        async def release(actor: Any) -> None:
            if previous:
                await chooser.release(actor)
            else:
                chooser.release(actor)

        rounds = 0
        started = time.process_time()
        while time.process_time() - started < budget_s or rounds < 3:
            await release(held.popleft())
            held.append(await chooser.acquire())
            rounds += 1
        return 1e6 * (time.process_time() - started) / rounds

    return asyncio.run(measure())


def driver_ms(count: int, episodes: int, previous: bool, tmp: Path) -> float:
    """Milliseconds of this process's CPU per episode, through `RayExecutor.execute` with
    ``count`` stand-in actors."""
    from tests.support.ray_stand_ins import StandInExecutor, stand_in_executor, stand_in_plan

    slots = min(1024, 4 * count)
    settings, plan = stand_in_plan(
        tmp / f"problems-{count}-{previous}.jsonl",
        episodes,
        concurrency=slots,
        output=tmp / f"traces-{count}-{previous}.jsonl",
    )
    answer = _answer()

    class StandIns(StandInExecutor):
        def stand_ins(self) -> list[Any]:
            joined = [_actor(n + 1, answer) for n in range(count)]
            if previous:
                self.previous = PreviousActors(slots)
                for actor in joined:
                    self.previous.join(actor)
            return joined

        async def _on_actor(self, spec: Any, host: str) -> Any:
            if not previous:
                return await super()._on_actor(spec, host)
            actor = await self.previous.acquire()
            try:  # the whole spec, settings and system prompt with each episode
                future = asyncio.ensure_future(actor.handle.run.remote(spec, host))
                await asyncio.wait({future}, timeout=self.deadline_s)
                result = future.result()
            finally:
                await self.previous.release(actor)
            actor.episodes += 1
            self.stats.executions += result.executions
            return result.trace

    async def run() -> float:
        async with stand_in_executor(StandIns, settings, plan) as executor:
            started = time.process_time()
            await executor.execute()
            cpu = time.process_time() - started
        assert executor.stats.done == episodes, (executor.stats.done, episodes)
        return 1000 * cpu / episodes

    return asyncio.run(run())


def stand_ins(quick: bool) -> None:
    episodes = 1000 if quick else 4000
    budget = 0.5 if quick else 2.0
    rows = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for count in ACTORS:
            # the previous choice costs O(actors²) per episode: fewer episodes at 1,000
            before = episodes if count < 1000 else max(100, episodes // 20)
            rows.append(
                (
                    count,
                    choice_us(count, True, budget),
                    choice_us(count, False, budget),
                    driver_ms(count, before, True, tmp),
                    driver_ms(count, episodes, False, tmp),
                )
            )
    print(
        f"stand-in actors (1 CPU each, 4 slots per actor up to 1,024), {episodes} markers "
        "episodes answered at once; CPU of this process"
    )
    header = (
        f"{'actors':>6} {'choice µs prev':>15} {'choice µs now':>14} "
        f"{'driver ms/ep prev':>18} {'driver ms/ep now':>17} {'ep/s/core now':>14}"
    )
    print(header)
    print("-" * len(header))
    for count, choice_before, choice_now, ms_before, ms_now in rows:
        print(
            f"{count:>6} {choice_before:>15.1f} {choice_now:>14.1f} {ms_before:>18.2f} "
            f"{ms_now:>17.2f} {1000 / ms_now:>14.0f}"
        )
    choice = rows[-1][2]
    worst = max(r[4] for r in rows)  # the most CPU per episode, at any number of actors
    print()
    rate = 1000 / worst
    targets = (
        (f"driver CPU per episode <= {TARGET_EPISODE_MS:g} ms", worst, worst <= TARGET_EPISODE_MS),
        (f"actor choice at 1,000 <= {TARGET_CHOICE_US:g} µs", choice, choice <= TARGET_CHOICE_US),
        (f"episodes/s per driver core >= {TARGET_RATE:g}", rate, rate >= TARGET_RATE),
    )
    for label, figure, met in targets:
        print(f"{label}: {figure:.2f} ({'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes")
    parser.add_argument("--paths", action="store_true", help="local, shards and Ray, end to end")
    parser.add_argument("--latency", type=float, default=0.2, help="--paths: server latency")
    parser.add_argument("--parallel", type=int, default=8, help="--paths: P")
    args = parser.parse_args()
    if args.paths:
        paths(args)
    else:
        stand_ins(quick=args.quick)


TARGET_RAY_MS = 1.5
"""The Ray driver's CPU per episode at 2 nodes, end to end."""


def paths(args: argparse.Namespace) -> None:
    samples = 3 if args.quick else 5
    problems_count = 20 if args.quick else 40
    load_before = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory() as name,
        FakeOllama(parallel=args.parallel, latency_s=args.latency) as server,
    ):
        tmp = Path(name)
        problems = tmp / "problems.jsonl"
        write_add_problems(problems, problems_count)
        server.set_responder(lambda path, body: ADD_ANSWER)
        cases = run_cases(server.url, problems, samples, args.parallel, tmp)
    bound = args.parallel / args.latency
    print(
        f"{problems_count * samples} markers episodes, latency {args.latency:g} s, "
        f"P = {args.parallel} (bound {bound:g} episodes/s), {os.cpu_count()} cores, load "
        f"average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    header = (
        f"{'case':<14} {'wall s':>7} {'episodes':>8} {'steady ep/s':>12} {'ratio':>6} "
        f"{'exec/s':>7} {'driver CPU ms/ep':>17} {'ep/call':>8}"
    )
    print(header)
    print("-" * len(header))
    for c in cases:
        per_call = f"{c.per_call:.1f}" if c.per_call is not None else "-"
        print(
            f"{c.name:<14} {c.wall_s:>7.1f} {c.episodes:>8} {c.steady:>12.1f} "
            f"{c.steady / bound:>6.2f} {c.steady * c.executions / c.episodes:>7.1f} "
            f"{c.driver_ms:>17.1f} {per_call:>8}"
        )
    two = next(c for c in cases if c.name == "ray, 2 nodes")
    met = "met" if two.driver_ms <= TARGET_RAY_MS else "NOT met"
    print(
        f"\nRay driver CPU per episode at 2 nodes <= {TARGET_RAY_MS:g} ms: "
        f"{two.driver_ms:.2f} ({met})"
    )


if __name__ == "__main__":
    main()
