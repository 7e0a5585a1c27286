"""`tracegen dedup`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def dedup(
    input: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL file to write.")],
    by: Annotated[
        str, typer.Option("--by", help="Compare the final code, or the assistant's text.")
    ] = "code",
    threshold: Annotated[
        float, typer.Option("--threshold", help="Jaccard similarity of near-duplicates.")
    ] = 0.85,
    removed: Annotated[
        Path | None, typer.Option("--removed", help="JSONL of each trace removed and why.")
    ] = None,
) -> None:
    """Drop duplicate and near-duplicate solutions of a problem, keeping the best of each."""
    from tracegen.export.dedup import dedup_command

    dedup_command(input=input, output=output, by=by, threshold=threshold, removed_file=removed)
