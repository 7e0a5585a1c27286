"""`tracegen problems`: its --limit and --problem-ids are `tracegen run`'s
(`tracegen.config`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from tracegen.cli.app import settings_command

SUMMARY = "List a problem set: id, entry point, number of tests."
SOURCE: Any = None
"""The problem set argument, made with the command: its help lists the sets by name
(`tracegen.problems.loader.source_names`), which only the command imports."""


@settings_command("problems", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import presentation, with_run_options
    from tracegen.config import RunSettings

    global SOURCE
    declared = RunSettings.model_fields["problems"]
    names = ", ".join(presentation("problems", declared)["choices"])
    SOURCE = typer.Argument(help=f"A problem set ({names}) or a file.")

    def problems(
        source: Annotated[str, SOURCE] = declared.default,
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
