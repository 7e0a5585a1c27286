"""`tracegen run`: an option for every setting of `RunSettings` that has one."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer

from tracegen.cli.app import settings_command
from tracegen.cli.options import ConfigOpt

SUMMARY = "Generate traces: run episodes concurrently, score them, append them to a JSONL file."


@settings_command("run", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import parameters
    from tracegen.config import RunSettings

    def run(**flags: Any) -> None:
        from tracegen.config import load_settings
        from tracegen.generate.command import run_command

        config_file = flags.pop("config")
        settings = load_settings(RunSettings, flags, config_file=config_file)
        raise typer.Exit(run_command(settings))

    config = inspect.Parameter(
        "config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt
    )
    run.__signature__ = inspect.Signature([*parameters(RunSettings), config])  # type: ignore[attr-defined]
    run.__doc__ = SUMMARY
    return run
