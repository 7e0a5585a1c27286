"""Peak memory and time of `tracegen convert`, for every output, at two input sizes.

    python benchmarks/convert.py                          # 20 MB and 500 MB inputs
    python benchmarks/convert.py --sizes 20,100 --previous-max-mb 100

For each output (`-o` JSONL, `--parquet`, `--to-hf`), with logprobs dropped and kept, the
chat conversion of each input runs as a child process; the table gives its wall and CPU
seconds and peak RSS, and the last column the peak RSS at the largest size over the
smallest (flat memory: within 1.10). The previous release runs from a temporary git
worktree (see `benchmarks/common.py`) on inputs up to ``--previous-max-mb`` (it is slow),
and the new figure gets the speed-up over it. The trace files are those of
`benchmarks/stats.py` (23 kB per trace, logprobs most of it); the previous release reads a
copy without the fields it does not know (token ids, usage details and the like), which it
would refuse, and the speed-up is that of this checkout on the same copy.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import PREVIOUS, Run, measure, previous_release, readable_copy, tracegen
from benchmarks.stats import write_file

OUTPUTS = {"jsonl": ["-o", "{out}.jsonl"], "parquet": ["--parquet", "{out}.parquet"]}
OUTPUTS["hf"] = ["--to-hf", "{out}.hf"]


def convert(source: Path, output: str, keep: bool, out: Path) -> list[str]:
    flags = [flag.format(out=out) for flag in OUTPUTS[output]]
    return tracegen("convert", str(source), "--chat-format", *flags, *(["--keep-logprobs"] * keep))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,500", help="Input sizes in MB, comma-separated.")
    parser.add_argument("--previous-max-mb", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp, previous_release() as previous:
        inputs, previous_inputs = {}, {}
        for size in sizes:
            inputs[size] = Path(tmp) / f"traces-{size}.jsonl"
            write_file(inputs[size], size)
            if previous is not None and size <= args.previous_max_mb:
                previous_inputs[size] = Path(tmp) / f"traces-{size}-{PREVIOUS}.jsonl"
                readable_copy(inputs[size], previous_inputs[size], previous)
        print("chat format; peak RSS of the largest process; release " + PREVIOUS + " alongside\n")
        header = ("output", "logprobs", "input MB", "seconds", "CPU s", "peak RSS MB", "speed-up")
        print("| {:<15} | {:<8} | {:>8} | {:>8} | {:>7} | {:>11} | {:>14} |".format(*header))
        print(f"|{'-' * 17}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 9}|{'-' * 13}|{'-' * 16}|")
        flat: list[str] = []
        for output in OUTPUTS:
            for keep in (False, True):
                peaks: list[float] = []
                for size, source in inputs.items():
                    out = Path(tmp) / "out"
                    new = measure_alone(convert(source, output, keep, out), Path(tmp))
                    peaks.append(new.peak_rss_mb)
                    row(output, keep, size, new, None)
                    if previous is not None and size in previous_inputs:
                        copy = convert(previous_inputs[size], output, keep, out)
                        old = measure_alone(copy, Path(tmp), previous)
                        same = measure_alone(copy, Path(tmp))
                        row(output, keep, size, same, old, "this, its copy")
                        row(output, keep, size, old, None, f"release {PREVIOUS}")
                flat.append(
                    f"{output}, logprobs {'kept' if keep else 'dropped'}: "
                    f"{peaks[-1] / peaks[0]:.2f}"
                )
        print(f"\npeak RSS at {sizes[-1]} MB over {sizes[0]} MB: " + "; ".join(flat))


def measure_alone(argv: list[str], tmp: Path, env: dict[str, str] | None = None) -> Run:
    """`measure`, then remove what the conversion wrote (``tmp/out*``)."""
    run = measure(argv, env)
    for path in tmp.glob("out*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return run


def row(output: str, keep: bool, size: int, r: Run, old: Run | None, label: str = "") -> None:
    speedup = ""
    if old is not None:
        speedup = f"{old.seconds / r.seconds:.1f}× ({old.cpu_seconds / r.cpu_seconds:.1f}×)"
    name = label or output
    lp = "" if label else ("kept" if keep else "dropped")
    print(
        f"| {name:<15} | {lp:<8} | {size:>8} | {r.seconds:>8.1f} | {r.cpu_seconds:>7.1f} | "
        f"{r.peak_rss_mb:>11.0f} | {speedup:>14} |"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
