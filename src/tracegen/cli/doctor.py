"""`tracegen doctor`."""

from __future__ import annotations

import typer

from tracegen.cli.app import app
from tracegen.cli.options import (
    BackendOpt,
    ChatTemplateOpt,
    ConfigOpt,
    HostOpt,
    ModelOpt,
    SandboxOpt,
    ToolParserOpt,
)


@app.command()
def doctor(
    host: HostOpt = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    chat_template: ChatTemplateOpt = None,
    sandbox: SandboxOpt = None,
    tool_parser: ToolParserOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Check the server (or the embedded model), the model, logprobs, token ids, continuation
    and the sandbox; exit 1 if anything is wrong."""
    from tracegen.config import RunSettings, load_settings
    from tracegen.generate.doctor import doctor_command

    flags = {
        "hosts": host or None,
        "backend": backend,
        "model": model,
        "chat_template": chat_template,
        "sandbox": sandbox,
        "tool_parser": tool_parser,
    }
    settings = load_settings(RunSettings, flags, config_file=config)
    raise typer.Exit(doctor_command(settings))
