"""The Atropos environment's own cost: CPU per episode on the environment's side, and the
episodes it keeps in flight, against the loopback llama.cpp stand-in server.

`TracegenEnv` runs groups as Atropos's ``env_manager`` does, W groups at a time, each of
``group_size`` episodes (``markers`` mode: one model turn, one sandboxed test run, the
group's ids and masks built and checked). The stand-in answers every request after a fixed
latency, at most P at a time. Printed per W: episodes per second, the most requests the
server saw at once, and the CPU of the environment's event loop thread per episode (all of
tracegen's client side: requests, parsing, the sandbox client, the trace, the group), with
the group building alone beside it. What Atropos itself adds (polling ``/status-env``,
posting the group) is left out: it is the same for every environment.

    python benchmarks/rl_env.py            # the README table (about a minute)
    python benchmarks/rl_env.py --quick    # fewer groups
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from tests.support.fake_model import Reply
    from tests.support.fake_openai import FakeOpenAI

    groups = 6 if args.quick else 24
    print(
        f"stand-in llama.cpp server: {LATENCY_S * 1000:.0f} ms a request, {PARALLEL} at once; "
        f"groups of {GROUP} markers episodes, {groups} groups a row\n"
    )
    print("| groups in flight | episodes in flight | server busy (max) | episodes/s "
          "| env CPU ms/episode | group building ms/group |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2, 4):
            fake = FakeOpenAI("llamacpp", parallel=PARALLEL, latency_s=LATENCY_S)
            fake.set_responder(lambda path, body: Reply(content=ADD_ANSWER))
            with fake:
                row = asyncio.run(run_case(fake.url, Path(tmp), fake.vocab.decode, workers, groups))
                busy = fake.max_in_flight
            print(
                f"| {workers} | {workers * GROUP} | {busy} | {row['eps']:.1f} "
                f"| {row['cpu_ms']:.1f} | {row['group_ms']:.2f} |"
            )


if __name__ == "__main__":
    main()
