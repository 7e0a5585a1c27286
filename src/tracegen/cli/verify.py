"""`tracegen verify`: its --problems, --sandbox and --sandbox-packages are `tracegen run`'s
(`tracegen.config`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import settings_command

SUMMARY = "Run solutions against their problems' tests in the sandbox."


@settings_command("verify", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import with_run_options

    def verify(
        solutions: Annotated[Path, typer.Argument(help="JSONL of {problem_id, code}, or traces.")],
        problems: str | None = None,
        sandbox: str | None = None,
        sandbox_packages: bool | None = None,
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="Verdicts JSONL.")
        ] = None,
        json_out: Annotated[
            bool, typer.Option("--json", help="One JSON object per solution.")
        ] = False,
        time_scale: Annotated[
            float,
            typer.Option("--time-scale", help="Multiplies program problems' time limits."),
        ] = 1.0,
        all_tests: Annotated[
            bool,
            typer.Option(
                "--all-tests",
                help="Run every test of a program (partial credit), not up to the first failure.",
            ),
        ] = False,
    ) -> None:
        from tracegen.config import RunSettings, load_settings
        from tracegen.generate.verify import verify_command

        given = {"problems": problems, "sandbox": sandbox, "sandbox_packages": sandbox_packages}
        verify_command(
            load_settings(RunSettings, given, env={}),
            solutions=solutions,
            output=output,
            json_out=json_out,
            time_scale=time_scale,
            all_tests=all_tests,
        )

    with_run_options(verify, SUMMARY, ("problems", "sandbox", "sandbox_packages"))
    return verify
