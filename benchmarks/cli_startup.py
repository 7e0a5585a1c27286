"""Median wall time of `tracegen --help` against a bare `python -c pass`.

python benchmarks/cli_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table


def median_ms(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    tracegen = shutil.which("tracegen") or sys.exit("tracegen is not installed on PATH")
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("tracegen --help", [tracegen, "--help"]),
        ("tracegen stats --help", [tracegen, "stats", "--help"]),
    ]
    table = Table(title=f"CLI start-up, median of {args.runs} runs")
    table.add_column("command")
    table.add_column("median ms", justify="right")
    table.add_column("over python", justify="right")
    base = median_ms(rows[0][1], args.runs)
    for name, cmd in rows:
        ms = base if cmd is rows[0][1] else median_ms(cmd, args.runs)
        table.add_row(name, f"{ms:.0f}", f"+{ms - base:.0f} ms")
    Console().print(table)


if __name__ == "__main__":
    main()
