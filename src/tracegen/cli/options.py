"""Options of commands that take no settings model, shared by several commands and declared
once. The options of `run` and `doctor` are made from `tracegen.config` (`settings_options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML file of settings (flags and env win).")
]
ProblemsOpt = Annotated[
    str | None,
    typer.Option(
        "--problems",
        help="builtin, humaneval, mbpp, gsm8k, or a file (tracegen JSONL/YAML, HumanEval).",
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Use only the first N problems.")]
IdsOpt = Annotated[
    str | None, typer.Option("--problem-ids", help="Comma-separated problem ids to use.")
]
SandboxOpt = Annotated[
    str | None, typer.Option("--sandbox", help="Isolation: auto (default), bwrap, builtin, rlimit.")
]
