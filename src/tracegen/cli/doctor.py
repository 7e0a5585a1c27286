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
)


@app.command()
def doctor(
    host: HostOpt = None,
    model: ModelOpt = None,
    backend: BackendOpt = None,
    chat_template: ChatTemplateOpt = None,
    sandbox: SandboxOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Check the server, the model, logprobs and the sandbox; exit 1 if anything is wrong."""
    from tracegen.config import RunSettings, load_settings
    from tracegen.generate.doctor import doctor_command

    flags = {
        "hosts": host or None,
        "model": model,
        "backend": backend,
        "chat_template": chat_template,
        "sandbox": sandbox,
    }
    settings = load_settings(RunSettings, flags, config_file=config)
    raise typer.Exit(doctor_command(settings))
