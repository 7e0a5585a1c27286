"""What is left of the host's page cache as memory between executions: a timing channel.

The seccomp filter keeps an execution from evicting pages (``fadvise``, ``MADV_PAGEOUT``)
and from reading whether a page is cached without caching it (``mincore``, ``cachestat``,
``RWF_NOWAIT``). What it cannot take away: reading a file caches it (a bit set, for good
until the host evicts it), and a read of a file the cache holds is faster than one from the
disk (a bit read, once: the read sets it). One execution (the sender) reads the files of
the 1 bits of a random message among files nobody else reads; a later one (the receiver)
times a read of each and splits the times in two. Printed per isolation: the bits sent, the
errors, the capacity left (``n·(1 − H(error rate))``) and that capacity per second of the
two executions' own time, and per pair of executions.

As root each execution's slot has a memory cgroup, and what an execution brought into the
cache is evicted when it ends (`tracegen.sandbox._zygote`): the receiver finds every file as
the sender did, and decodes no better than chance. As a user without a delegated cgroup the
channel stays.

``python benchmarks/page_cache_channel.py [--bits 256] [--sandbox bwrap,builtin,rlimit]``
(as root: the files are evicted from the cache before each run, as an attacker's fresh
files would be.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tracegen.sandbox import Sandbox, SandboxLimits

SENDER = """
import json, os, time
started = time.perf_counter()
for path, bit in zip({files!r}, {message!r}):
    if bit:
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, 1)
        os.close(fd)
print(json.dumps(time.perf_counter() - started))
"""
RECEIVER = """
import json, os, time
started, times = time.perf_counter(), []
for path in {files!r}:
    fd = os.open(path, os.O_RDONLY)
    before = time.perf_counter_ns()
    os.read(fd, 1)
    times.append(time.perf_counter_ns() - before)
    os.close(fd)
print(json.dumps([time.perf_counter() - started, times]))
"""


def _split(times: list[int]) -> list[int]:
    """Two clusters of read times (1-D k-means from the extremes): 1 for the fast (cached)."""
    low, high = float(min(times)), float(max(times))
    for _ in range(50):
        cut = math.sqrt(low * high)
        fast = [t for t in times if t <= cut] or [low]
        slow = [t for t in times if t > cut] or [high]
        low, high = sum(fast) / len(fast), sum(slow) / len(slow)
    cut = math.sqrt(low * high)
    return [int(t <= cut) for t in times]


def _entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _evict(files: list[str]) -> None:
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


async def measure(isolation: str, files: list[str], rounds: int) -> dict[str, float]:
    limits = SandboxLimits(timeout_s=30, cpu_s=30)
    sent = errors = 0
    seconds = 0.0
    async with Sandbox(isolation, limits=limits, concurrency=1) as sandbox:
        for _ in range(rounds):
            message = [random.getrandbits(1) for _ in files]
            _evict(files)
            sender = await sandbox.run_code(SENDER.format(files=files, message=message))
            receiver = await sandbox.run_code(RECEIVER.format(files=files))
            assert sender.status == receiver.status == "ok", (sender.error, receiver.error)
            elapsed, times = json.loads(receiver.stdout)
            got = _split(times)
            sent += len(message)
            errors += sum(a != b for a, b in zip(got, message, strict=True))
            seconds += json.loads(sender.stdout) + elapsed
    rate = errors / sent
    capacity = sent * (1 - _entropy(rate))
    return {
        "bits": sent,
        "errors": errors,
        "capacity": capacity,
        "per_second": capacity / seconds,
        "per_pair": capacity / rounds,
    }


def cold_files(count: int) -> list[str]:
    """``count`` host files nobody else reads (``/usr/share/doc/*/copyright``)."""
    files = [str(p) for p in sorted(Path("/usr/share/doc").glob("*/copyright"))[:count]]
    if len(files) < count:
        raise SystemExit(f"only {len(files)} files in /usr/share/doc/*/copyright")
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=256, help="files (bits) per message")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sandbox", default="bwrap,builtin,rlimit", help="comma-separated")
    args = parser.parse_args()
    files = cold_files(args.bits)
    table = Table(title=f"Page-cache timing channel: {args.bits} files, {args.rounds} messages")
    for column in ("isolation", "bits", "errors", "capacity (bits)", "bits/s", "bits per pair"):
        table.add_column(column)
    for isolation in args.sandbox.split(","):
        r = asyncio.run(measure(isolation, files, args.rounds))
        table.add_row(
            isolation,
            str(r["bits"]),
            str(r["errors"]),
            f"{r['capacity']:.0f}",
            f"{r['per_second']:.0f}",
            f"{r['per_pair']:.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
