"""Wall time and peak memory of `tracegen report` beside `tracegen stats` on the same file.

    python benchmarks/report.py                 # 20,000 traces (about 460 MB)
    python benchmarks/report.py --traces 5000 --repeat 1

Writes realistic traces (every mode shape, 300 logprob tokens per turn on some, as in
`benchmarks/stats.py`), reads the file once to warm the page cache, then runs the two
commands alternately as child processes, ``--repeat`` times each, and prints the median
of each and their ratio. The target: the report takes at most twice as long as stats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measure, tracegen
from benchmarks.stats import sample_lines

TARGET = 2.0


def write_traces(path: Path, count: int) -> None:
    pool = [orjson.loads(line) for line in sample_lines()]
    with path.open("wb") as fh:
        for n in range(count):
            row = pool[n % len(pool)]
            row["id"] = f"t{n}"
            row["problem_id"] = f"p{n % 164}"
            fh.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.jsonl"
        write_traces(path, args.traces)
        path.read_bytes()
        size_mb = path.stat().st_size / 1e6
        runs = {
            "tracegen stats --json": tracegen("stats", str(path), "--json"),
            "tracegen report -o report.html": tracegen(
                "report", str(path), "-o", str(Path(tmp) / "report.html")
            ),
        }
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        peak: dict[str, float] = dict.fromkeys(runs, 0.0)
        for _ in range(args.repeat):
            for name, argv in runs.items():
                run = measure(argv)
                seconds[name].append(run.seconds)
                cpu[name].append(run.cpu_seconds)
                peak[name] = max(peak[name], run.peak_rss_mb)
        page_mb = (Path(tmp) / "report.html").stat().st_size / 1e6
        print(f"{args.traces:,} traces, {size_mb:.0f} MB; report page {page_mb:.1f} MB")
        print(f"median of {args.repeat} alternating runs, 2 cores\n")
        print(
            f"| {'command':<32} | {'seconds':>8} | {'runs':<24} | {'CPU s':>6} "
            f"| {'peak RSS MB':>11} |"
        )
        print(f"|{'-' * 34}|{'-' * 10}|{'-' * 26}|{'-' * 8}|{'-' * 13}|")
        for name, values in seconds.items():
            runs_text = ", ".join(f"{v:.1f}" for v in values)
            print(
                f"| {name:<32} | {statistics.median(values):>8.1f} | {runs_text:<24} "
                f"| {statistics.median(cpu[name]):>6.1f} | {peak[name]:>11.0f} |"
            )
        stats_s, report_s = (statistics.median(v) for v in seconds.values())
        ratio = report_s / stats_s
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"\nreport / stats: {ratio:.2f} ({verdict} the {TARGET:.0f}x target)")


if __name__ == "__main__":
    main()
