"""Build the report: `stats`' numbers and the report's own counts, in one pass over the
files (on every core when they are large, as for `stats`), then the traces embedded for
browsing."""

from __future__ import annotations

import functools
import random
import sys
from pathlib import Path

from tracegen.errors import ConfigError, OutputError
from tracegen.jsonl import check_outputs
from tracegen.terminal import printable
from tracegen.views.report.facts import ReportFacts, ReportLine, logprob_cut
from tracegen.views.report.page import render_page
from tracegen.views.report.sample import read_sample
from tracegen.views.stats import collect_with, expand_files

DEFAULT_SAMPLE = 400


def build_report(
    files: list[str] | list[Path], *, sample: int = DEFAULT_SAMPLE, strict: bool = False
) -> str:
    """The report page of ``files`` (paths or globs) as HTML text."""
    if sample < 0:
        raise ConfigError(f"--sample: expected 0 or more, got {sample}")
    paths = expand_files([str(f) for f in files])
    cut = logprob_cut(sum(p.stat().st_size for p in paths))
    tally = functools.partial(ReportFacts, sample_size=sample, logprob_cut=cut)
    stats, facts = collect_with(paths, tally, ReportLine, by="mode", strict=strict)
    records = read_sample(paths, facts.sample_positions(random.Random(0)))
    return render_page(stats, facts, records)


def report_command(
    *, files: list[str], output: Path, sample: int = DEFAULT_SAMPLE, strict: bool = False
) -> None:
    """Write the report of ``files`` to ``output``; say where on stderr."""
    paths = expand_files(files)
    check_outputs(paths, output)
    if output.is_dir():
        raise OutputError(f"{output}: is a directory, expected a file name")
    page = build_report(paths, sample=sample, strict=strict)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"{output}: cannot write: {e.strerror or e}") from None
    shown = printable(str(output))
    print(f"report of {len(page) / 1e6:.1f} MB written to {shown}", file=sys.stderr)
