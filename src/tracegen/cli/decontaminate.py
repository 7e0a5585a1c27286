"""`tracegen decontaminate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


@app.command()
def decontaminate(
    input: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL file to write.")],
    against: Annotated[
        list[str],
        typer.Option("--against", help="Benchmarks, comma-separated: humaneval, or problem files."),
    ],
    ngram: Annotated[
        int, typer.Option("--ngram", help="Tokens in a shared run that marks contamination.")
    ] = 13,
    dropped: Annotated[
        Path | None, typer.Option("--dropped", help="JSONL of each trace dropped and why.")
    ] = None,
) -> None:
    """Drop traces whose problem or final code shares a long n-gram with a benchmark."""
    from tracegen.export.decontaminate import decontaminate_command

    decontaminate_command(
        input=input, output=output, against=against, ngram=ngram, dropped_file=dropped
    )
