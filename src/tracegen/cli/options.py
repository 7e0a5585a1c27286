"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

GEN = "Generation"
RUN = "Run"
OUT = "Output"

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML file of settings (flags and env win).")
]
HostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--host",
        help="Server URL (an OpenAI-compatible one with or without /v1); repeat for several."
        " [env: OLLAMA_HOST]",
    ),
]
BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Server kind: ollama, openai (an OpenAI-compatible server) or local (llama.cpp "
        "in process); auto (default) finds out what answers at each host, and runs the "
        "embedded model when no host or model is given and nothing answers at Ollama's "
        "address. [env: TRACEGEN_BACKEND]",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model name as the server knows it; for --backend local a GGUF file or a "
        "packaged model (smollm2-135m, gemma3-270m).",
    ),
]
ChatTemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--chat-template", help="--backend local: a Jinja chat template file for the model."
    ),
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
