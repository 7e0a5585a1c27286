"""`tracegen problems`: its --limit and --problem-ids are `tracegen run`'s
(`tracegen.config`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated

import typer

from tracegen.cli.app import settings_command

SUMMARY = "List a problem set: id, entry point, number of tests."


@settings_command("problems", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import parameters
    from tracegen.config import RunSettings

    def problems(
        source: Annotated[
            str, typer.Argument(help="builtin, starter, humaneval, mbpp, gsm8k or a path.")
        ] = "builtin",
        limit: int | None = None,
        problem_ids: str | None = None,
        json_out: Annotated[
            bool, typer.Option("--json", help="One JSON object per problem.")
        ] = False,
    ) -> None:
        from tracegen.views.problems import problems_command

        problems_command(source=source, limit=limit, problem_ids=problem_ids, json_out=json_out)

    own = {
        n: p.replace(kind=p.KEYWORD_ONLY)
        for n, p in inspect.signature(problems, eval_str=True).parameters.items()
    }
    settings = parameters(RunSettings, ("limit", "problem_ids"), env=False)
    problems.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [own["source"], *settings, own["json_out"]]
    )
    problems.__doc__ = SUMMARY
    return problems
