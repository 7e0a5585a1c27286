"""Throughput and peak memory of `tracegen convert --rl trl|atropos` and `--tokenized` beside
`--chat-format`, on trace files with exact token ids, at two sizes (memory should not grow).

    python benchmarks/token_convert.py                 # 20 MB and 100 MB files
    python benchmarks/token_convert.py --sizes 10 50

The traces are tests' tool-feedback and inline-tools episodes with exact ids (their text
padded to a few hundred tokens a turn), spread over 164 problems. Each conversion runs as a
child process, measured in a fresh wrapper (wall time, MB/s of input, the child's peak RSS).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
elapsed = time.perf_counter() - start
print(code, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""
FORMATS = {
    "--chat-format": ["--chat-format"],
    "--rl trl": ["--rl", "trl"],
    "--rl atropos": ["--rl", "atropos"],
    "--tokenized": ["--tokenized"],
}
PAD = 40


def pool(tmp: Path) -> list[dict[str, object]]:
    model = ChatmlModel(make_tokenizer(tmp / "tokenizer"))
    rows = []
    for k in range(4):
        for trace in (tool_feedback(model, k), inline_tools(model, k)):
            row = trace.to_json()
            for request in row["token_requests"]:
                request["completion_ids"] = request["completion_ids"] * PAD
                request["logprobs"] = request["logprobs"] * PAD
            rows.append(row)
    return rows


def write_file(path: Path, rows: list[dict[str, object]], size_mb: int) -> int:
    """Fill ``path`` with about ``size_mb`` MB of traces; the number of lines."""
    written = n = 0
    with path.open("wb") as fh:
        while written < size_mb * 1_000_000:
            row = rows[n % len(rows)]
            row["id"], row["problem_id"], row["sample"] = f"t{n}", f"p{n % 164}", n
            line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
            fh.write(line)
            written += len(line)
            n += 1
    return n


def measure(args: list[str]) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *args], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"failed: {' '.join(args)}")
    return float(out[1]), int(out[2]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 100])
    sizes = parser.parse_args().sizes
    with tempfile.TemporaryDirectory() as tmp:
        rows = pool(Path(tmp))
        results: dict[tuple[str, int], tuple[float, float]] = {}
        lines = {}
        for size in sizes:
            source = Path(tmp) / f"traces{size}.jsonl"
            lines[size] = write_file(source, rows, size)
            source.read_bytes()
            for name, flags in FORMATS.items():
                out = Path(tmp) / "out.jsonl"
                cmd = [sys.executable, "-m", "tracegen", "convert", str(source), *flags, "-o"]
                results[name, size] = measure([*cmd, str(out)])
        print(
            f"{'conversion':<15}" + "".join(f"{f'{s} MB ({lines[s]} traces)':>44}" for s in sizes)
        )
        print(
            f"{'':<15}"
            + "".join(f"{'s':>10}{'MB/s':>8}{'× chat':>8}{'peak MB':>10}{'':>8}" for _ in sizes)
        )
        for name in FORMATS:
            cells = ""
            for size in sizes:
                elapsed, peak = results[name, size]
                base = results["--chat-format", size][0]
                cells += f"{elapsed:>10.1f}{size / elapsed:>8.1f}{elapsed / base:>8.2f}"
                cells += f"{peak:>10.0f}{'':>8}"
            print(f"{name:<15}{cells}")


if __name__ == "__main__":
    main()
