"""`tracegen run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app
from tracegen.cli.options import (
    GEN,
    OUT,
    RUN,
    BackendOpt,
    ChatTemplateOpt,
    ConfigOpt,
    HostOpt,
    IdsOpt,
    LimitOpt,
    ModelOpt,
    ProblemsOpt,
    SandboxOpt,
)


@app.command()
def run(
    mode: Annotated[
        str | None, typer.Option(help="Conversation protocol.", rich_help_panel=GEN)
    ] = None,
    model: ModelOpt = None,
    host: HostOpt = None,
    backend: BackendOpt = None,
    problems: ProblemsOpt = None,
    limit: LimitOpt = None,
    problem_ids: IdsOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Traces file (JSONL).", rich_help_panel=OUT),
    ] = None,
    rejects: Annotated[
        Path | None,
        typer.Option(help="Write rejected traces and failed episodes here.", rich_help_panel=OUT),
    ] = None,
    num_samples: Annotated[
        int | None, typer.Option(help="Samples per problem.", rich_help_panel=RUN)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="In-flight episodes per host.", rich_help_panel=RUN)
    ] = None,
    only_success: Annotated[
        bool | None, typer.Option("--only-success", help="Keep traces that pass every test.")
    ] = None,
    only_ideal: Annotated[
        bool | None, typer.Option("--only-ideal", help="Keep successful traces of ideal shape.")
    ] = None,
    temperature: Annotated[float | None, typer.Option(rich_help_panel=GEN)] = None,
    seed: Annotated[
        int | None, typer.Option(help="Fixes sampling seeds and work order.", rich_help_panel=GEN)
    ] = None,
    max_iterations: Annotated[
        int | None, typer.Option(help="Execute-and-fix rounds.", rich_help_panel=GEN)
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Model turns or steps per episode.", rich_help_panel=GEN)
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Tokens per model turn (num_predict).", rich_help_panel=GEN)
    ] = None,
    num_ctx: Annotated[int | None, typer.Option(help="Context size.", rich_help_panel=GEN)] = None,
    top_logprobs: Annotated[
        int | None, typer.Option(help="Alternatives per token (0-20).", rich_help_panel=GEN)
    ] = None,
    logprobs: Annotated[
        str | None,
        typer.Option(
            help="raw (the model's distribution) or processed (the sampler's, after "
            "temperature and truncation, where the backend gives it: see README).",
            rich_help_panel=GEN,
        ),
    ] = None,
    continuation: Annotated[
        str | None,
        typer.Option(
            help="inline-tools: auto (the server's best), prefill, raw or continue.",
            rich_help_panel=GEN,
        ),
    ] = None,
    tool_parser: Annotated[
        str | None,
        typer.Option(
            help="native-tools: format of tool calls written as text.", rich_help_panel=GEN
        ),
    ] = None,
    constrain: Annotated[
        str | None,
        typer.Option(
            help="Constrain decoding to the mode's grammar: auto (where it helps the embedded "
            "model), on, off.",
            rich_help_panel=GEN,
        ),
    ] = None,
    chat_template: ChatTemplateOpt = None,
    threads: Annotated[
        int | None,
        typer.Option(
            help="--backend local: llama.cpp threads (default: half the cores).",
            rich_help_panel=RUN,
        ),
    ] = None,
    prompts_dir: Annotated[
        Path | None, typer.Option(help="Folder of system prompts overriding the shipped ones.")
    ] = None,
    require_logprobs: Annotated[
        bool | None, typer.Option("--require-logprobs", help="Fail if the server returns none.")
    ] = None,
    sandbox: SandboxOpt = None,
    exec_timeout: Annotated[
        float | None,
        typer.Option(
            "--exec-timeout",
            help="Seconds each execution may run (default 10).",
            rich_help_panel=RUN,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Run one part of the plan: I/N (0 ≤ I < N), or auto / auto/N from a Slurm, "
            "Kubernetes or SGE job array; join the parts with `tracegen merge`.",
            rich_help_panel=RUN,
        ),
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            help="Where episodes run: local (default) or ray (actors across a Ray cluster).",
            rich_help_panel=RUN,
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster to join: auto, or HOST:PORT (default: RAY_ADDRESS, else a "
            "local Ray).",
            rich_help_panel=RUN,
        ),
    ] = None,
    overwrite: Annotated[
        bool | None, typer.Option("--overwrite", help="Start the output file afresh.")
    ] = None,
    quiet: Annotated[bool | None, typer.Option("--quiet", "-q", help="No progress output.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Generate traces: run episodes concurrently, score them, append them to a JSONL file."""
    flags = dict(locals())
    config_file = flags.pop("config")
    flags["hosts"] = flags.pop("host") or None

    from tracegen.config import RunSettings, load_settings

    settings = load_settings(RunSettings, flags, config_file=config_file)

    from tracegen.generate.command import run_command

    raise typer.Exit(run_command(settings))
