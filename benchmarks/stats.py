"""Throughput and peak memory of `tracegen stats`, beside the previous release's.

    python benchmarks/stats.py                   # a 500 MB trace file, 3 runs each
    python benchmarks/stats.py --size-mb 50 --runs 1
    python benchmarks/stats.py --small           # small lines: no logprobs, short messages
    python benchmarks/stats.py --references      # also jq, datasets and pydantic (slow)
    python benchmarks/stats.py --no-release      # without the previous release's runs

Beside each reader runs a plain decode of the same file (``orjson.loads`` of every line,
nothing kept), the floor any reader of JSON lines pays: the ratio to it is the figure that
does not depend on the machine's load.
Writes realistic traces (every mode shape, logprobs on some) to a temporary file, reads it
once to warm the page cache, then runs each reader as a child process from a cold start
and reports the median wall time, MB/s, CPU seconds (all processes) and peak RSS (the
largest process, `getrusage(RUSAGE_CHILDREN)` in a fresh wrapper per run). The previous
release runs from a temporary git worktree (see `benchmarks/common.py`), with the same
Python and packages. On a shared machine, the CPU seconds and the ratios are the figures
to trust. `--references` needs jq (`apt-get install -y jq`).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import PREVIOUS, Run, measure, previous_release, tracegen
from tests.support.traces import all_shapes

LOAD_JSON = """
import sys, datasets
datasets.disable_progress_bars()
datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
"""

VALIDATE = """
import sys
from tracegen.jsonl import iter_records
from tracegen.schema import Trace
sum(1 for _ in iter_records(sys.argv[1], Trace))
"""

PLAIN_DECODE = """
import sys, orjson
loads = orjson.loads
for line in open(sys.argv[1], "rb"):
    loads(line)
"""

LOGPROB_TOKENS = 300


def sample_lines(small: bool = False) -> list[bytes]:
    """A pool of trace lines of realistic size (a few kB, logprobs adding more); ``small``:
    about 2 kB, no logprobs, short messages."""
    lines = []
    for trace in all_shapes(copies=5):
        row = trace.to_json()
        if small:
            row["logprobs"], row["token_requests"] = [], None
            for message in row["messages"]:
                message["content"] = message["content"][:80]
            lines.append(row)
            continue
        for turn in row["logprobs"]:
            turn["tokens"] = (turn["tokens"] * LOGPROB_TOKENS)[:LOGPROB_TOKENS]
        for message in row["messages"]:
            if message["role"] == "assistant":
                message["content"] = message["content"] + "\n<think>" + "reasoning " * 150
                message["content"] += "</think>"
        lines.append(row)
    return [orjson.dumps(row) for row in lines]


def write_file(path: Path, size_mb: int, small: bool = False) -> int:
    """Fill ``path`` with about ``size_mb`` MB of traces; return the number of lines."""
    pool = [orjson.loads(line) for line in sample_lines(small)]
    target = size_mb * 1_000_000
    written = n = 0
    with path.open("wb") as fh:
        while written < target:
            row = pool[n % len(pool)]
            row["id"] = f"t{n}"
            row["problem_id"] = f"p{n % 164}"
            line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
            fh.write(line)
            written += len(line)
            n += 1
    return n


def median_run(argv: list[str], runs: int, env: dict[str, str] | None = None) -> Run:
    results = [measure(argv, env) for _ in range(runs)]
    return Run(
        statistics.median(r.seconds for r in results),
        statistics.median(r.cpu_seconds for r in results),
        max(r.peak_rss_mb for r in results),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="small lines, no logprobs")
    parser.add_argument("--references", action="store_true")
    parser.add_argument("--no-release", action="store_true", help="not the previous release")
    args = parser.parse_args()
    if args.references and shutil.which("jq") is None:
        raise SystemExit("jq is missing: apt-get install -y jq")
    release = contextlib.nullcontext(None) if args.no_release else previous_release()
    with tempfile.TemporaryDirectory() as tmp, release as previous:
        path = Path(tmp) / "traces.jsonl"
        lines = write_file(path, args.size_mb, args.small)
        size_mb = path.stat().st_size / 1e6
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        readers = {
            "tracegen stats --json": tracegen("stats", str(path), "--json"),
            "tracegen stats (tables)": tracegen("stats", str(path)),
        }
        references: dict[str, list[str]] = {}
        if args.references:
            cache = str(Path(tmp) / "hf-cache")
            references = {
                "jq -c . FILE": ["jq", "-c", ".", str(path)],
                'datasets.load_dataset("json")': [
                    sys.executable,
                    "-c",
                    LOAD_JSON,
                    str(path),
                    cache,
                ],
                "pydantic Trace per line": [sys.executable, "-c", VALIDATE, str(path)],
            }
        print(f"{size_mb:.0f} MB, {lines} traces ({size_mb * 1e6 / lines / 1e3:.1f} kB each)")
        print(f"median of {args.runs} runs, each from a cold start\n")
        header = ("reader", "seconds", "MB/s", "CPU s", "peak RSS MB", "speed-up", "× decode")
        print("| {:<42} | {:>8} | {:>7} | {:>7} | {:>11} | {:>14} | {:>17} |".format(*header))
        print(f"|{'-' * 44}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 13}|{'-' * 16}|{'-' * 19}|")
        plain = median_run([sys.executable, "-c", PLAIN_DECODE, str(path)], args.runs)

        def row(name: str, r: Run, speedup: str = "") -> None:
            versus = f"{plain.seconds / r.seconds:.1f}× ({plain.cpu_seconds / r.cpu_seconds:.1f}×)"
            print(
                f"| {name:<42} | {r.seconds:>8.2f} | {size_mb / r.seconds:>7.0f} | "
                f"{r.cpu_seconds:>7.2f} | {r.peak_rss_mb:>11.0f} | {speedup:>14} | "
                f"{versus:>17} |"
            )
            sys.stdout.flush()

        row("orjson.loads of every line (plain decode)", plain)
        for name, argv in readers.items():
            new = median_run(argv, args.runs)
            if previous is None:
                row(name, new)
                continue
            old = median_run(argv, args.runs, previous)
            speedup = f"{old.seconds / new.seconds:.1f}× ({old.cpu_seconds / new.cpu_seconds:.1f}×)"
            row(name, new, speedup)
            row(f"{name}, release {PREVIOUS}", old)
        for name, argv in references.items():
            row(name, median_run(argv, args.runs))


if __name__ == "__main__":
    main()
