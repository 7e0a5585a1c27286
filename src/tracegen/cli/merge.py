"""`tracegen merge`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def merge(
    output: Annotated[Path, typer.Argument(help="The merged traces file (JSONL).")],
    shards: Annotated[
        list[str], typer.Argument(help="The shards' outputs, or globs matching them.")
    ],
    rejects: Annotated[
        Path | None, typer.Option(help="Also merge the shards' rejects into this file.")
    ] = None,
    allow_partial: Annotated[
        bool, typer.Option("--allow-partial", help="Merge even if shards are missing or not done.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing merged output.")
    ] = False,
) -> None:
    """Join the shards of a `run --shard` into one run that `run -o OUTPUT` resumes."""
    from tracegen.generate.merge import merge_command

    merge_command(output, shards, rejects=rejects, allow_partial=allow_partial, overwrite=overwrite)
