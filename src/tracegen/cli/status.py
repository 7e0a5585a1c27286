"""`tracegen status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def status(
    output: Annotated[Path, typer.Argument(help="The -o of a run split with --shard.")],
) -> None:
    """Show how far each shard of a run split with --shard is."""
    from tracegen.generate.status import status_command

    status_command(output)
