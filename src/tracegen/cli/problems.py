"""`tracegen problems`."""

from __future__ import annotations

from typing import Annotated

import typer

from tracegen.cli.app import app
from tracegen.cli.options import IdsOpt, LimitOpt


@app.command("problems")
def problems_(
    source: Annotated[
        str, typer.Argument(help="builtin, humaneval, mbpp, gsm8k or a path.")
    ] = "builtin",
    limit: LimitOpt = None,
    problem_ids: IdsOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per problem.")] = False,
) -> None:
    """List a problem set: id, entry point, number of tests."""
    from tracegen.views.problems import problems_command

    problems_command(source=source, limit=limit, problem_ids=problem_ids, json_out=json_out)
