"""`tracegen doctor`: the settings of `tracegen run` that choose the model, server and
sandbox."""

from __future__ import annotations

from collections.abc import Callable

from tracegen.cli.app import settings_command

SUMMARY = (
    "Check the server (or the embedded model), the model, logprobs, token ids, continuation "
    "and the sandbox; exit 1 if anything is wrong."
)
SETTINGS = ("hosts", "backend", "model", "chat_template", "sandbox", "tool_parser")


@settings_command("doctor", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import run_settings_command
    from tracegen.config import RunSettings

    def doctor(settings: RunSettings) -> int:
        from tracegen.generate.doctor import doctor_command

        return doctor_command(settings)

    return run_settings_command(SUMMARY, doctor, SETTINGS)
