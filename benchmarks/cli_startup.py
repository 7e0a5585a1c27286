"""Start-up of `tracegen --help` and `tracegen stats --help` against a bare `python -c pass`,
beside the previous release's.

    python benchmarks/cli_startup.py [--runs 21]

Each command runs ``--runs`` times, interleaved so that load from other jobs falls on all
of them alike; the table gives the median wall and CPU milliseconds and what each costs
over bare Python. The previous release runs from a temporary git worktree (see
`benchmarks/common.py`) with the same Python and packages. The target is at most 150 ms
over bare Python.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import PREVIOUS, Run, measure, previous_release, tracegen

BUDGET_MS = 150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    with previous_release() as previous:
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], None)
        }
        for words in (["--help"], ["stats", "--help"]):
            name = " ".join(["tracegen", *words])
            commands[name] = (tracegen(*words), None)
            if previous is not None:
                commands[f"{name}, release {PREVIOUS}"] = (tracegen(*words), previous)
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, env) in commands.items():
                runs[name].append(measure(argv, env))
    wall = {name: statistics.median(r.seconds * 1000 for r in rs) for name, rs in runs.items()}
    cpu = {name: statistics.median(r.cpu_seconds * 1000 for r in rs) for name, rs in runs.items()}
    base = "python -c pass"
    print(f"CLI start-up, median of {args.runs} runs (target: ≤ {BUDGET_MS} ms over python)\n")
    header = ("command", "wall ms", "over python", "CPU ms", "over python")
    print("| {:<38} | {:>8} | {:>11} | {:>8} | {:>11} |".format(*header))
    print(f"|{'-' * 40}|{'-' * 10}|{'-' * 13}|{'-' * 10}|{'-' * 13}|")
    for name in commands:
        over = "" if name == base else f"+{wall[name] - wall[base]:.0f}"
        over_cpu = "" if name == base else f"+{cpu[name] - cpu[base]:.0f}"
        cells = f"{wall[name]:>8.0f} | {over:>11} | {cpu[name]:>8.0f} | {over_cpu:>11}"
        print(f"| {name:<38} | {cells} |")


if __name__ == "__main__":
    main()
