"""Build the report: `stats`' numbers and the report's own counts, read side by side.

`collect` (the stats pass) runs in this process while `collect_facts` (the report's pass)
runs in a forked child, so on two cores the report costs about one pass over the files.
"""

from __future__ import annotations

import multiprocessing
import random
import sys
from pathlib import Path

from tracegen.errors import ConfigError, OutputError
from tracegen.views.report.facts import collect_facts
from tracegen.views.report.page import render_page
from tracegen.views.report.sample import read_sample
from tracegen.views.stats import collect, expand_files

DEFAULT_SAMPLE = 400
PARALLEL_BYTES = 8 << 20


def build_report(files: list[str], *, sample: int = DEFAULT_SAMPLE, strict: bool = False) -> str:
    """The report page of ``files`` (paths or globs) as HTML text."""
    if sample < 0:
        raise ConfigError(f"--sample: expected 0 or more, got {sample}")
    paths = expand_files(files)
    small = sum(p.stat().st_size for p in paths) < PARALLEL_BYTES
    if small or sys.platform != "linux":
        stats = collect(paths, by="mode", strict=strict)
        facts = collect_facts(paths, sample)
    else:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            pending = pool.apply_async(collect_facts, (paths, sample))
            stats = collect(paths, by="mode", strict=strict)
            facts = pending.get()
    records = read_sample(paths, facts.sample_positions(random.Random(0)))
    return render_page(stats, facts, records)


def report_command(
    *, files: list[str], output: Path, sample: int = DEFAULT_SAMPLE, strict: bool = False
) -> None:
    """Write the report of ``files`` to ``output``; say where on stderr."""
    if output.is_dir():
        raise OutputError(f"{output}: is a directory, expected a file name")
    page = build_report(files, sample=sample, strict=strict)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"{output}: cannot write: {e.strerror or e}") from None
    print(f"report of {len(page) / 1e6:.1f} MB written to {output}", file=sys.stderr)
