"""Options shared by several commands that are not settings, declared once. Every option that
is a setting (`run`'s, and those `doctor`, `verify` and `problems` share with it) is made from
its declaration in `tracegen.config` (`settings_options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML file of settings (flags and env win).")
]
