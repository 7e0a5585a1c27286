"""`tracegen problems`: its --limit and --problem-ids are `tracegen run`'s
(`tracegen.config`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from tracegen.cli.app import settings_command

SUMMARY = "List a problem set: id, entry point, number of tests."


@settings_command("problems", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import with_run_options

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
        from tracegen.config import RunSettings, load_settings
        from tracegen.views.problems import problems_command

        given = {"limit": limit, "problem_ids": problem_ids}
        settings = load_settings(RunSettings, given, env={})
        problems_command(
            source=source, limit=settings.limit, problem_ids=settings.problem_ids, json_out=json_out
        )

    with_run_options(problems, SUMMARY, ("limit", "problem_ids"))
    return problems
