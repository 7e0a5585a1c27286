"""Throughput and peak memory of `tracegen stats` beside jq and `datasets.load_dataset`.

    python benchmarks/stats.py              # a 500 MB trace file
    python benchmarks/stats.py --size-mb 50

Writes realistic traces (every mode shape, logprobs on some) to a temporary file, reads it
once to warm the page cache, then runs each reader as a child process and reports wall
time, MB/s and the child's peak RSS (`getrusage(RUSAGE_CHILDREN)`, measured in a fresh
wrapper process per reader so the numbers do not mix). Needs jq (`apt-get install -y jq`).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.traces_factory import all_shapes

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
elapsed = time.perf_counter() - start
rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(code, elapsed, rss_kb)
"""

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

LOGPROB_TOKENS = 300


def sample_lines() -> list[bytes]:
    """A pool of trace lines of realistic size (a few kB, logprobs adding more)."""
    lines = []
    for trace in all_shapes(copies=5):
        row = trace.to_json()
        for turn in row["logprobs"]:
            turn["tokens"] = (turn["tokens"] * LOGPROB_TOKENS)[:LOGPROB_TOKENS]
        for message in row["messages"]:
            if message["role"] == "assistant":
                message["content"] = message["content"] + "\n<think>" + "reasoning " * 150
                message["content"] += "</think>"
        lines.append(row)
    return [orjson.dumps(row) for row in lines]


def write_file(path: Path, size_mb: int) -> int:
    """Fill ``path`` with about ``size_mb`` MB of traces; return the number of lines."""
    pool = [orjson.loads(line) for line in sample_lines()]
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


def measure(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of running ``argv`` to completion."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"{argv[0]} failed with exit status {out[0]}")
    return float(out[1]), int(out[2]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    args = parser.parse_args()
    if shutil.which("jq") is None:
        raise SystemExit("jq is missing: apt-get install -y jq")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.jsonl"
        lines = write_file(path, args.size_mb)
        size_mb = path.stat().st_size / 1e6
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        stats = [sys.executable, "-m", "tracegen", "stats", str(path)]
        runs = {
            "tracegen stats --json": [*stats, "--json"],
            "tracegen stats (tables)": stats,
            "jq -c . FILE": ["jq", "-c", ".", str(path)],
            'datasets.load_dataset("json")': [
                sys.executable,
                "-c",
                LOAD_JSON,
                str(path),
                str(Path(tmp) / "hf-cache"),
            ],
            "pydantic Trace per line (reference)": [sys.executable, "-c", VALIDATE, str(path)],
        }
        print(f"{size_mb:.0f} MB, {lines} traces ({size_mb * 1e6 / lines / 1e3:.1f} kB each)\n")
        print(f"| {'reader':<36} | {'seconds':>8} | {'MB/s':>7} | {'peak RSS MB':>11} |")
        print(f"|{'-' * 38}|{'-' * 10}|{'-' * 9}|{'-' * 13}|")
        for name, argv in runs.items():
            seconds, rss = measure(argv)
            print(f"| {name:<36} | {seconds:>8.1f} | {size_mb / seconds:>7.0f} | {rss:>11.0f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
