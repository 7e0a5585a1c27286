"""`tracegen show`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    index: Annotated[int | None, typer.Option("--index", help="0-based record number.")] = None,
    id: Annotated[str | None, typer.Option("--id", help="Trace id.")] = None,
    only_failed: Annotated[
        bool, typer.Option("--only-failed", help="Pick among failures.")
    ] = False,
) -> None:
    """Render one trace: steps coloured by kind, test results, metrics."""
    from tracegen.views.show import show_command

    show_command(file=file, index=index, trace_id=id, only_failed=only_failed)
