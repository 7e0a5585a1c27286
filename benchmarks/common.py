"""What the benchmarks share: the previous release checked out beside this one, a child
process measured for wall time, CPU time and peak memory, and the CPU time and page faults of
this process and the processes it started (a sandbox's, which it does not reap itself)."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = "3fdc947"
"""The commit of the previous release, measured side by side with this checkout."""

ADD_ANSWER = (
    "<think>I add the two numbers.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>\n"
    "<think>Check it.</think>\n<verify>add(1, 2) == 3</verify>"
)
"""A model answer (markers mode) that solves every problem of `write_add_problems`."""


def write_add_problems(path: Path, count: int) -> Path:
    """``count`` problems asking for ``add(a, b)``, one test each, written to ``path``."""
    import orjson

    with path.open("wb") as fh:
        for i in range(count):
            problem = {
                "id": f"add{i}",
                "prompt": f"Write add(a, b) returning the sum ({i}).",
                "entry_point": "add",
                "tests": [{"name": "t", "kind": "io", "args": [1, 2], "expected": 3}],
            }
            fh.write(orjson.dumps(problem) + b"\n")
    return path


MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
"""


PRUNE = """
import sys, orjson
from pydantic import ValidationError
from tracegen.schema import Trace
for line in sys.stdin.buffer:
    row = orjson.loads(line)
    while True:
        try:
            Trace.model_validate(row)
            break
        except ValidationError as error:
            extra = [e["loc"] for e in error.errors() if e["type"] == "extra_forbidden"]
            if not extra:
                raise
            for *path, key in extra:
                node = row
                for step in path:
                    node = node[step]
                del node[key]
    sys.stdout.buffer.write(orjson.dumps(row) + b"\\n")
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float


def measure(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """Run ``argv`` to completion in a fresh wrapper process (so peak RSS, the largest of
    any process it started, is its own) and say what it took."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"{' '.join(argv)} failed with exit status {out[0]}")
    return Run(float(out[1]), float(out[2]), int(out[3]) / 1024)


def tracegen(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracegen", *args]


@contextlib.contextmanager
def previous_release() -> Iterator[dict[str, str] | None]:
    """An environment in which ``python -m tracegen`` runs the previous release: a temporary
    git worktree of `PREVIOUS` first on ``PYTHONPATH``, removed afterwards. ``None`` when
    this is not a git checkout that has the commit."""
    tmp = Path(tempfile.mkdtemp(prefix="tracegen-previous-"))
    added = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tmp), PREVIOUS],
        capture_output=True,
        check=False,
    )
    try:
        yield {**os.environ, "PYTHONPATH": str(tmp / "src")} if added.returncode == 0 else None
    finally:
        if added.returncode == 0:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp)],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(tmp, ignore_errors=True)


def readable_copy(source: Path, target: Path, env: dict[str, str]) -> None:
    """Write ``source``'s traces to ``target`` without the fields that the tracegen of
    ``env`` does not know (it refuses them), for an older release to read the same traces."""
    with source.open("rb") as fin, target.open("wb") as fout:
        subprocess.run([sys.executable, "-c", PRUNE], stdin=fin, stdout=fout, env=env, check=True)


def descendants_usage(root: int | None = None) -> tuple[float, int]:
    """CPU seconds and minor page faults of every live descendant of ``root`` (this process)
    and of the children they reaped, read from ``/proc``."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append((int(entry.name), fields))
    total, faults, todo = 0.0, 0, [os.getpid() if root is None else root]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15]) / tick
            faults += int(fields[7]) + int(fields[8])
            todo.append(pid)
    return total, faults


def own_usage(children: bool = True) -> tuple[float, int]:
    """CPU seconds and minor page faults of this process (and, with ``children``, of the
    children it reaped)."""
    usages = [resource.getrusage(resource.RUSAGE_SELF)]
    if children:
        usages.append(resource.getrusage(resource.RUSAGE_CHILDREN))
    return sum(u.ru_utime + u.ru_stime for u in usages), sum(u.ru_minflt for u in usages)


def all_usage() -> tuple[float, int]:
    """CPU seconds and minor page faults of this process and every process it started."""
    cpu, faults = own_usage()
    tree_cpu, tree_faults = descendants_usage()
    return cpu + tree_cpu, faults + tree_faults
