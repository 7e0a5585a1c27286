"""The embedded model's threads: one per core idle when the model loads, the rule
``benchmarks/threads.py`` measured best on quiet and busy machines alike, unless
``--threads`` is given; the run's header says which and why."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracegen.cores import affinity_cores, busy_cores, usable_cores
from tracegen.errors import TracegenError
from tracegen.llm.local import LocalBackend, choose_threads
from tracegen.llm.packaged import DEFAULT_MODEL, find_model

PERFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
WHY = re.compile(
    r"(\d+) threads?: one per idle core, ([\d.]+) of (\d+) cores? busy"
    r"(, at most \d+ by the CPU quota)?, see docs/"
)


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [
        *((2, 0.0, 2), (2, 0.4, 2), (2, 0.5, 1), (2, 1.0, 1), (2, 2.0, 1), (2, 9.0, 1)),
        *((1, 0.0, 1), (8, 0.0, 8), (8, 2.3, 6), (8, 7.9, 1)),
    ],
)
def test_one_thread_per_idle_core(cores: int, busy: float, threads: int) -> None:
    chosen, why = choose_threads(cores, busy, allowed=cores)
    assert chosen == threads
    shown = f"{busy:.1f} of {cores} core{'s' if cores > 1 else ''} busy"
    plural = "s" if threads > 1 else ""
    assert why == f"{threads} thread{plural}: one per idle core, {shown}, see docs/performance.md"


def test_a_cpu_quota_caps_the_threads_whatever_the_rest_of_the_host_does() -> None:
    """A container held to 2 CPUs on a 64-core host where other tenants keep 30 cores busy:
    34 cores are idle, and the quota allows 2 threads."""
    assert choose_threads(64, 30.0, allowed=2) == (
        2,
        "2 threads: one per idle core, 30.0 of 64 cores busy, at most 2 by the CPU quota, "
        "see docs/performance.md",
    )
    assert choose_threads(64, 63.0, allowed=2)[0] == 1
    assert choose_threads(2, 0.0, allowed=2)[1].endswith("2 cores busy, see docs/performance.md")


def test_a_core_another_process_holds_counts_as_busy() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert busy_cores(0.5) >= 0.8
    finally:
        spinner.kill()
        spinner.wait()
    assert busy_cores(0.1) <= affinity_cores() + 0.2


def test_the_default_follows_the_best_rows_of_the_tables_in_the_docs() -> None:
    """Each table of `benchmarks/threads.py` in docs/performance.md measured one state of the
    machine; in each, the default picks the thread count of the best row. The cores other work
    kept busy are the table's last column (`busy_cores` before each run) or, in a table that
    has none, the 1-minute load average, as `busy_cores` falls back to it."""
    text = PERFORMANCE.read_text()
    section = text.split("## Threads of the embedded model", 1)[1].split("\n## ", 1)[0]
    states = set()
    for table in re.findall(r"^(?:\|.*\n)+", section, re.M):
        rows = re.findall(
            r"^\| (embedded|llama\.cpp server) \| (\d+) \|(?: [^|]+ \|){3} ([\d.]+) \|"
            r"(?: [^|]+ \|)* ([\d.]+)–([\d.]+) \|$",
            table,
            re.M,
        )
        assert len({threads for _, threads, *_ in rows}) >= 2, table
        for path in ("embedded", "llama.cpp server"):
            mine = [row for row in rows if row[0] == path]
            best = int(max(mine, key=lambda row: float(row[2]))[1])
            for busy in {float(x) for row in mine for x in row[3:]}:
                assert choose_threads(2, min(busy, 2.0), allowed=2)[0] == best, (path, busy, table)
                states.add(choose_threads(2, min(busy, 2.0), allowed=2)[0])
    assert states == {1, 2}, "a quiet machine and a busy one"


def test_the_header_says_the_threads_and_why() -> None:
    try:
        model = find_model(DEFAULT_MODEL)
        default = LocalBackend(model, context_tokens=2048, slots=1)
        given = LocalBackend(model, context_tokens=2048, slots=1, threads=3)
    except TracegenError as e:
        pytest.skip(f"the local backend is not installed: {e}")
    shown = WHY.search(default.describe(constrained=True))
    assert shown and int(shown[1]) == default.threads and int(shown[3]) == affinity_cores()
    assert default.threads <= usable_cores()
    assert "· 3 threads (--threads) ·" in given.describe(constrained=False)
    assert given.threads == 3
