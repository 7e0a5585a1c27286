"""Throughput and peak memory of `tracegen convert --rl trl|atropos` and `--tokenized` beside
`--chat-format`, to each output, on trace files with exact token ids at two sizes (memory
should not grow).

    python benchmarks/token_convert.py                      # 20 MB and 100 MB files
    python benchmarks/token_convert.py --sizes 10,50 --outputs jsonl

The traces are tests' tool-feedback and inline-tools episodes with exact ids (their text
padded to a few hundred tokens a turn), spread over 164 problems. Each conversion runs as a
child process measured in a fresh wrapper (see `benchmarks/common.py`): wall and CPU
seconds, MB/s of input, the largest process's peak RSS, and the peak RSS at the largest
size over the smallest (flat memory: within 1.10).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measure, tracegen
from tests.support.token_traces import (
    ChatmlModel,
    inline_tools,
    make_tokenizer,
    numbered,
    padded,
    tool_feedback,
)

FORMATS = {
    "--chat-format": ["--chat-format"],
    "--rl trl": ["--rl", "trl"],
    "--rl atropos": ["--rl", "atropos"],
    "--tokenized": ["--tokenized"],
}
OUTPUTS = {"jsonl": ["-o", "{out}.jsonl"], "parquet": ["--parquet", "{out}.parquet"]}
OUTPUTS["hf"] = ["--to-hf", "{out}.hf"]
PAD = 40
PROBLEMS = 164


def write_file(path: Path, size_mb: int, tmp: Path) -> int:
    """Fill ``path`` with about ``size_mb`` MB of traces; the number of lines."""
    model = ChatmlModel(make_tokenizer(tmp / "tokenizer"))
    traces = [t for k in range(4) for t in (tool_feedback(model, k), inline_tools(model, k))]
    written = n = 0
    with path.open("wb") as fh:
        for line in numbered(padded(traces, PAD), PROBLEMS):
            if written >= size_mb * 1_000_000:
                break
            fh.write(line)
            written += len(line)
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100", help="Input sizes in MB, comma-separated.")
    parser.add_argument("--outputs", default=",".join(OUTPUTS), help="Of " + ", ".join(OUTPUTS))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    outputs = args.outputs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        inputs, lines = {}, {}
        for size in sizes:
            inputs[size] = Path(tmp) / f"traces-{size}.jsonl"
            lines[size] = write_file(inputs[size], size, Path(tmp))
        print(", ".join(f"{s} MB: {lines[s]} traces" for s in sizes) + "\n")
        header = ("format", "output", "input MB", "seconds", "CPU s", "MB/s", "peak RSS MB")
        print("| {:<14} | {:<7} | {:>8} | {:>7} | {:>7} | {:>6} | {:>11} |".format(*header))
        print(f"|{'-' * 16}|{'-' * 9}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 8}|{'-' * 13}|")
        flat = []
        for name, flags in FORMATS.items():
            for output in outputs:
                peaks = []
                for size, source in inputs.items():
                    out = Path(tmp) / "out"
                    target = [flag.format(out=out) for flag in OUTPUTS[output]]
                    run = measure(tracegen("convert", str(source), *flags, *target))
                    for path in Path(tmp).glob("out*"):
                        shutil.rmtree(path) if path.is_dir() else path.unlink()
                    peaks.append(run.peak_rss_mb)
                    print(
                        f"| {name:<14} | {output:<7} | {size:>8} | {run.seconds:>7.1f} | "
                        f"{run.cpu_seconds:>7.1f} | {size / run.seconds:>6.1f} | "
                        f"{run.peak_rss_mb:>11.0f} |"
                    )
                    sys.stdout.flush()
                flat.append(f"{name} {output}: {peaks[-1] / peaks[0]:.2f}")
        print(f"\npeak RSS at {sizes[-1]} MB over {sizes[0]} MB: " + "; ".join(flat))


if __name__ == "__main__":
    main()
