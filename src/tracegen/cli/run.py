"""`tracegen run`: an option for every setting of `RunSettings` that has one."""

from __future__ import annotations

from collections.abc import Callable

from tracegen.cli.app import settings_command

SUMMARY = "Generate traces: run episodes concurrently, score them, append them to a JSONL file."


@settings_command("run", SUMMARY)
def build() -> Callable[..., None]:
    from tracegen.cli.settings_options import run_settings_command
    from tracegen.config import RunSettings

    def run(settings: RunSettings) -> int:
        from tracegen.generate.run import run_command

        return run_command(settings)

    return run_settings_command(SUMMARY, run)
