"""`tracegen verify`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app
from tracegen.cli.options import ProblemsOpt, SandboxOpt


@app.command()
def verify(
    solutions: Annotated[Path, typer.Argument(help="JSONL of {problem_id, code}, or traces.")],
    problems: ProblemsOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Verdicts JSONL.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per solution.")] = False,
    sandbox: SandboxOpt = None,
) -> None:
    """Run solutions against their problems' tests in the sandbox."""
    from tracegen.views.verdict_stream import verify_command

    verify_command(
        solutions=solutions,
        problems=problems or "builtin",
        output=output,
        json_out=json_out,
        sandbox=sandbox or "auto",
    )
