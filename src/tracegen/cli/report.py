"""`tracegen report`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def report(
    files: Annotated[list[str], typer.Argument(help="Trace files or globs.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write.")] = Path(
        "report.html"
    ),
    sample: Annotated[
        int, typer.Option("--sample", help="Traces embedded for browsing, at most.")
    ] = 400,
    strict: Annotated[bool, typer.Option("--strict", help="Malformed lines are fatal.")] = False,
) -> None:
    """Write one self-contained HTML page: stats tables, plots and a trace browser."""
    from tracegen.views.report import report_command

    report_command(files=files, output=output, sample=sample, strict=strict)
