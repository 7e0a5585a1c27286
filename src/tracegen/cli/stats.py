"""`tracegen stats`."""

from __future__ import annotations

from typing import Annotated

import typer

from tracegen.cli.app import app
from tracegen.views.breakdowns import BY_KEYS


@app.command()
def stats(
    files: Annotated[list[str], typer.Argument(help="Trace files or globs.")],
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    by: Annotated[
        str | None,
        typer.Option("--by", help=f"Break down by one of: {', '.join(BY_KEYS)}."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Malformed lines are fatal.")] = False,
) -> None:
    """Summarise trace files: rates, distributions, failures, per-problem success."""
    from tracegen.views.stats import stats_command

    stats_command(files=files, json_out=json_out, by=by, strict=strict)
