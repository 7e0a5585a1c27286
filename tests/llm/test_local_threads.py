"""The embedded model's threads: the count measured best by ``benchmarks/threads.py`` unless
``--threads`` is given, and the run's header says which and why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracegen.errors import TracegenError
from tracegen.llm.local import MEASURED_CORES, MEASURED_THREADS, LocalBackend, choose_threads
from tracegen.llm.packaged import DEFAULT_MODEL, find_model

PERFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def test_the_default_is_the_measured_best_and_says_so() -> None:
    assert choose_threads(2) == (1, "1 thread: measured best on 2 cores, see docs/performance.md")
    threads, why = choose_threads(8)
    assert threads == 4 and why == (
        "4 threads: 1 of 2 cores measured best, 8 cores here, see docs/performance.md"
    )
    assert choose_threads(1)[0] == 1


def test_the_default_follows_the_best_row_of_the_table_in_the_docs() -> None:
    text = PERFORMANCE.read_text()
    section = text.split("## Threads of the embedded model", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(
        r"^\| embedded \| (\d+) \| [^|]+ \| [^|]+ \| [^|]+ \| ([\d.]+) \|", section, re.M
    )
    assert len(rows) >= MEASURED_CORES, "one row per thread count, 1..cores"
    best = max(rows, key=lambda row: float(row[1]))
    assert int(best[0]) == MEASURED_THREADS
    assert f"on {MEASURED_CORES} cores" in section


def test_the_header_says_the_threads_and_why() -> None:
    try:
        model = find_model(DEFAULT_MODEL)
        default = LocalBackend(model, context_tokens=2048, slots=1)
        given = LocalBackend(model, context_tokens=2048, slots=1, threads=3)
    except TracegenError as e:
        pytest.skip(f"the local backend is not installed: {e}")
    assert f"· {choose_threads()[1]} ·" in default.describe(constrained=True)
    assert "· 3 threads (--threads) ·" in given.describe(constrained=False)
    assert given.threads == 3
