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
ToolParserOpt = Annotated[
    str | None,
    typer.Option(
        "--tool-parser",
        help="native-tools: format of tool calls written as text: auto (from the chat "
        "template or the model's name) or a family: hermes, qwen3_coder, deepseek_v31, "
        "llama3_json, mistral, kimi_k2, glm45, openai… (README, Tool calls).",
        rich_help_panel=GEN,
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
