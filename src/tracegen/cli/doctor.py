"""`tracegen doctor`: the settings of `tracegen run` that choose the model, server and
sandbox."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer

from tracegen.cli.app import settings_command
from tracegen.cli.options import ConfigOpt

SUMMARY = (
    "Check the server (or the embedded model), the model, logprobs, token ids, continuation "
    "and the sandbox; exit 1 if anything is wrong."
)
SETTINGS = ("hosts", "backend", "model", "chat_template", "sandbox", "tool_parser")


@settings_command("doctor", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import parameters
    from tracegen.config import RunSettings

    def doctor(**flags: Any) -> None:
        from tracegen.config import load_settings
        from tracegen.generate.doctor import doctor_command

        config_file = flags.pop("config")
        settings = load_settings(RunSettings, flags, config_file=config_file)
        raise typer.Exit(doctor_command(settings))

    config = inspect.Parameter(
        "config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt
    )
    doctor.__signature__ = inspect.Signature([*parameters(RunSettings, SETTINGS), config])  # type: ignore[attr-defined]
    doctor.__doc__ = SUMMARY
    return doctor
