"""Each RL adapter's own cost, side by side: CPU per episode on the environment's side.

- **Atropos** (`TracegenEnv`): groups run as Atropos's ``env_manager`` runs them, W groups at a
  time, each of ``group_size`` episodes (``markers`` mode: one model turn, one sandboxed test
  run, the group's ids and masks built and checked), against the loopback llama.cpp stand-in
  server (a fixed latency, at most P requests at once). Measured: the CPU of the
  environment's event loop thread per episode (requests, parsing, the sandbox client, the
  trace, the group), with the group building alone beside it. What Atropos itself adds
  (polling ``/status-env``, posting the group) is left out.
- **Hand-off core** (`tracegen.generate.handoff`, the tracegen side of the OpenEnv and
  verifiers adapters): the same ``markers`` episode with its one turn answered in process,
  16 at once; the CPU of the event loop thread per episode.
- **OpenEnv** (``python -m tracegen.openenv``): OpenEnv's own server in a child process,
  16 clients (OpenEnv's ``GenericEnvClient``) each running episodes: reset, one step; the
  server process's own CPU (its threads, not the sandbox's processes) per episode.
- **NeMo-Gym** (`TracegenResourcesServer` served by uvicorn in a child process): one
  ``/verify`` of a right program per episode, 16 at once; the server process's CPU.

An adapter whose hub is not installed is said to be so.

    python benchmarks/rl_env.py            # the docs table (a few minutes)
    python benchmarks/rl_env.py --quick    # fewer episodes"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), os.environ.get("TRACEGEN_BENCH_SRC") or str(ROOT / "src")]

from benchmarks.common import ADD_ANSWER, write_add_problems  # noqa: E402

os.environ.setdefault("WANDB_MODE", "disabled")

LATENCY_S = 0.2
PARALLEL = 8
GROUP = 4


async def run_case(url: str, tmp: Path, decode: Any, workers: int, groups: int) -> dict[str, float]:
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from tests.support.token_traces import make_tokenizer

    from tracegen.atropos.env import TracegenEnv, TracegenEnvConfig
    from tracegen.atropos.groups import scored_group

    tokenizer = tmp / "tok"
    if not tokenizer.exists():
        make_tokenizer(tokenizer)
    config = TracegenEnvConfig(
        tokenizer_name=str(tokenizer),
        group_size=GROUP,
        mode="markers",
        problems=str(write_add_problems(tmp / "problems.jsonl", 50)),
        sandbox="rlimit",
        concurrency=64,
        use_wandb=False,
        traces_path=str(tmp / f"traces-{workers}.jsonl"),
    )
    server = APIServerConfig(
        base_url=f"{url}/v1", model_name="test-model", api_key="x", health_check=False
    )

    class Bench(TracegenEnv):
        def _decode(self, ids: Any) -> str:
            text: str = decode(list(ids))
            return text

    env = Bench(config, [server])
    await env.setup()
    kept: list[Any] = []
    try:
        await env.collect_trajectories(await env.get_next_item())  # warm up
        left = groups

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                data, _ = await env.collect_trajectories(await env.get_next_item())
                kept.append(data)

        wall, cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(worker() for _ in range(workers)))
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    finally:
        await env.close()
    from tracegen.schema import Trace

    lines = Path(config.traces_path).read_bytes().splitlines()
    traces = [Trace.model_validate_json(line) for line in lines]
    shaped = time.thread_time()
    for k in range(0, len(traces), GROUP):
        scored_group(traces[k : k + GROUP], GROUP, None, decode)
    shaped = time.thread_time() - shaped
    episodes = groups * GROUP
    assert all(g is not None and len(g["tokens"]) == GROUP for g in kept), "a group lost samples"
    return {
        "episodes": episodes,
        "eps": episodes / wall,
        "cpu_ms": 1000 * cpu / episodes,
        "group_ms": 1000 * shaped / (len(traces) / GROUP),
    }


CONCURRENT = 16


def _self_cpu_s(pid: int) -> float:
    """A process's own CPU seconds (user + system, all its threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(code: str, port: int) -> subprocess.Popen[bytes]:
    """A child process running ``code`` (which serves on ``port``), once it answers."""
    import httpx

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return proc
        except httpx.TransportError:
            assert proc.poll() is None, "the server did not start"
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start")


async def handoff_case(problems: Path, episodes: int) -> dict[str, float]:
    from tracegen.config import RunSettings
    from tracegen.generate.handoff import HandedRuns, Reply

    runs = HandedRuns(RunSettings(mode="markers", problems=str(problems), sandbox="rlimit"))
    answer = Reply(content=ADD_ANSWER)

    async def one() -> float:
        episode = runs.episode(runs.spec())
        await episode.start()
        trace = await episode.answer(answer)
        return float(getattr(trace, "reward", 0.0))

    try:
        await one()  # warm up
        limit = asyncio.Semaphore(CONCURRENT)

        async def bounded() -> float:
            async with limit:
                return await one()

        wall, cpu = time.perf_counter(), time.thread_time()
        rewards = await asyncio.gather(*(bounded() for _ in range(episodes)))
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    finally:
        await runs.aclose()
    assert all(r == 1.0 for r in rewards), "an episode was not judged right"
    return {"eps": episodes / wall, "cpu_ms": 1000 * cpu / episodes}


def openenv_case(problems: Path, episodes: int) -> dict[str, float]:
    from openenv.core.generic_client import GenericEnvClient

    port = _free_port()
    os.environ.update(
        TRACEGEN_MODE="markers", TRACEGEN_PROBLEMS=str(problems), TRACEGEN_SANDBOX="rlimit"
    )
    proc = _serve(f"from tracegen.openenv.server import main; main(['--port', '{port}'])", port)
    url = f"http://127.0.0.1:{port}"

    async def client(n: int) -> list[float]:
        rewards = []
        async with GenericEnvClient(base_url=url, message_timeout_s=300) as env:
            for _ in range(n):
                await env.reset()
                result = await env.step({"content": ADD_ANSWER})
                rewards.append(result.reward)
        return rewards

    async def run(n: int) -> list[float]:
        each = [n // CONCURRENT + (i < n % CONCURRENT) for i in range(CONCURRENT)]
        done = await asyncio.gather(*(client(k) for k in each if k))
        return [r for rs in done for r in rs]

    try:
        asyncio.run(run(CONCURRENT))  # warm up
        wall, cpu = time.perf_counter(), _self_cpu_s(proc.pid)
        rewards = asyncio.run(run(episodes))
        wall, cpu = time.perf_counter() - wall, _self_cpu_s(proc.pid) - cpu
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert all(r == 1.0 for r in rewards), "an episode was not judged right"
    return {"eps": episodes / wall, "cpu_ms": 1000 * cpu / episodes}


NEMO_SERVER = """
import antlr4  # noqa: F401  (first, where nemo_gym's path ordering would load another one)
from unittest.mock import MagicMock
import uvicorn
from nemo_gym.server_utils import ServerClient
from tracegen.nemo_gym import TracegenResourcesServer, TracegenResourcesServerConfig
config = TracegenResourcesServerConfig(host="127.0.0.1", port={port}, entrypoint="",
    name="tracegen", tracegen={{"problems": "{problems}", "sandbox": "rlimit"}})
server = TracegenResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
uvicorn.run(server.setup_webserver(), host="127.0.0.1", port={port}, log_level="warning")
"""


def nemo_gym_case(problems: Path, episodes: int) -> dict[str, float]:
    import httpx

    port = _free_port()
    proc = _serve(NEMO_SERVER.format(port=port, problems=problems), port)
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": ADD_ANSWER, "annotations": []}],
    }
    response = {
        "id": "r",
        "created_at": 0,
        "model": "policy",
        "object": "response",
        "output": [message],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }

    async def run(n: int) -> list[float]:
        limit = asyncio.Semaphore(CONCURRENT)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:

            async def one(i: int) -> float:
                body = {
                    "responses_create_params": {"input": "add"},
                    "response": response,
                    "verifier_metadata": {"problem_id": f"add{i % 50}"},
                }
                async with limit:
                    answer = await http.post("/verify", json=body)
                reward: float = answer.json()["reward"]
                return reward

            return await asyncio.gather(*(one(i) for i in range(n)))

    try:
        asyncio.run(run(CONCURRENT))  # warm up
        wall, cpu = time.perf_counter(), _self_cpu_s(proc.pid)
        rewards = asyncio.run(run(episodes))
        wall, cpu = time.perf_counter() - wall, _self_cpu_s(proc.pid) - cpu
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert all(r == 1.0 for r in rewards), "an episode was not judged right"
    return {"eps": episodes / wall, "cpu_ms": 1000 * cpu / episodes}


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def adapters(tmp: Path, atropos_cpu: float | None, episodes: int) -> None:
    """The side-by-side table of every adapter (``atropos_cpu``: measured above)."""
    problems = write_add_problems(tmp / "adapters.jsonl", 50)
    print("\n| adapter | what runs an episode | episodes/s | env CPU ms/episode |")
    print("|---|---|---:|---:|")
    atropos = "not installed" if atropos_cpu is None else f"{atropos_cpu:.1f}"
    print(f"| Atropos | a group member, 4 groups in flight | — | {atropos} |")
    rows = [
        ("hand-off core", "one turn answered in process", None, lambda: asyncio.run(
            handoff_case(problems, episodes))),
        ("OpenEnv", "reset + one step over OpenEnv's WebSocket", "openenv", lambda: openenv_case(
            problems, episodes)),
        ("NeMo-Gym", "one /verify", "nemo_gym", lambda: nemo_gym_case(problems, episodes)),
    ]  # fmt: skip
    for name, what, module, measure in rows:
        if module is not None and not _installed(module):
            print(f"| {name} | {what} | not installed | |")
            continue
        row = measure()
        print(f"| {name} | {what} | {row['eps']:.1f} | {row['cpu_ms']:.1f} |")
    print(
        "| verifiers | a rollout of verifiers' agent | — | hand-off core + verifiers' own "
        "rollout machinery |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from tests.support.fake_model import Reply
    from tests.support.fake_openai import FakeOpenAI

    groups = 6 if args.quick else 24
    episodes = 64 if args.quick else 320
    atropos_cpu = None
    with tempfile.TemporaryDirectory() as tmp:
        if _installed("atroposlib"):
            print(
                f"Atropos, stand-in llama.cpp server: {LATENCY_S * 1000:.0f} ms a request, "
                f"{PARALLEL} at once; groups of {GROUP} markers episodes, {groups} groups a row\n"
            )
            print("| groups in flight | episodes in flight | server busy (max) | episodes/s "
                  "| env CPU ms/episode | group building ms/group |")  # fmt: skip
            print("|---:|---:|---:|---:|---:|---:|")
            for workers in (1, 2, 4):
                fake = FakeOpenAI("llamacpp", parallel=PARALLEL, latency_s=LATENCY_S)
                fake.set_responder(lambda path, body: Reply(content=ADD_ANSWER))
                with fake:
                    case = run_case(fake.url, Path(tmp), fake.vocab.decode, workers, groups)
                    row = asyncio.run(case)
                    busy = fake.max_in_flight
                print(
                    f"| {workers} | {workers * GROUP} | {busy} | {row['eps']:.1f} "
                    f"| {row['cpu_ms']:.1f} | {row['group_ms']:.2f} |"
                )
                atropos_cpu = row["cpu_ms"]
        print(
            f"\nEvery adapter, {episodes} markers episodes of a right answer, "
            f"{CONCURRENT} at once (Atropos: the last row above)"
        )
        adapters(Path(tmp), atropos_cpu, episodes)


if __name__ == "__main__":
    main()
