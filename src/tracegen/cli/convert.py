"""`tracegen convert`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app

TOKENS = "Token ids (RL, tokenized SFT)"


@app.command()
def convert(
    input: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="JSONL output [default: IN.<format>.jsonl]."),
    ] = None,
    chat_format: Annotated[
        bool, typer.Option("--chat-format", help="OpenAI chat `messages` (TRL SFTTrainer).")
    ] = False,
    sharegpt: Annotated[
        bool, typer.Option("--sharegpt", help="ShareGPT `conversations` (from/value).")
    ] = False,
    training_format: Annotated[
        bool, typer.Option("--training-format", help="Problem + one assistant message.")
    ] = False,
    to_hf: Annotated[
        Path | None,
        typer.Option("--to-hf", help="Save a Hugging Face dataset (load_from_disk) here."),
    ] = None,
    parquet: Annotated[Path | None, typer.Option("--parquet", help="Write Parquet here.")] = None,
    only_success: Annotated[
        bool, typer.Option("--only-success", help="Keep traces that pass every test.")
    ] = False,
    only_ideal: Annotated[
        bool, typer.Option("--only-ideal", help="Keep successful traces of ideal shape.")
    ] = False,
    reasoning_field: Annotated[
        bool, typer.Option("--reasoning-field", help="Thinking in its own field, not <think>.")
    ] = False,
    keep_logprobs: Annotated[
        bool, typer.Option("--keep-logprobs", help="Carry token logprobs through.")
    ] = False,
    rl: Annotated[
        str | None,
        typer.Option(
            "--rl",
            help="RL rollouts as token ids: trl (GRPOTrainer rollout_func) or atropos "
            "(ScoredDataGroup per problem).",
            rich_help_panel=TOKENS,
        ),
    ] = None,
    tokenized: Annotated[
        bool,
        typer.Option(
            "--tokenized",
            help="input_ids + assistant_masks for SFTTrainer (model tokens only).",
            rich_help_panel=TOKENS,
        ),
    ] = False,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="Hugging Face tokenizer directory or .gguf file, for traces without token ids.",
            rich_help_panel=TOKENS,
        ),
    ] = None,
    require_exact: Annotated[
        bool,
        typer.Option(
            "--require-exact",
            help="Skip traces without the backend's exact token ids.",
            rich_help_panel=TOKENS,
        ),
    ] = False,
    max_length: Annotated[
        int | None,
        typer.Option(
            "--max-length", help="Cut --tokenized records to N tokens.", rich_help_panel=TOKENS
        ),
    ] = None,
    min_group_size: Annotated[
        int | None,
        typer.Option(
            "--min-group-size",
            help="--rl atropos: drop groups of fewer than N samples.",
            rich_help_panel=TOKENS,
        ),
    ] = None,
    drop_equal_scores: Annotated[
        bool,
        typer.Option(
            "--drop-equal-scores",
            help="--rl atropos: drop groups whose scores are all equal.",
            rich_help_panel=TOKENS,
        ),
    ] = False,
) -> None:
    """Turn traces into chat, ShareGPT, single-message, RL or tokenized training data,
    JSONL/HF/Parquet."""
    from tracegen.export.convert import convert_command

    asked = {"--chat-format": chat_format, "--sharegpt": sharegpt}
    asked |= {"--training-format": training_format, "--tokenized": tokenized}
    convert_command(
        input=input,
        formats=[flag for flag, on in asked.items() if on] + ([f"--rl {rl}"] if rl else []),
        output=output,
        to_hf=to_hf,
        parquet=parquet,
        only_success=only_success,
        only_ideal=only_ideal,
        reasoning_field=reasoning_field,
        keep_logprobs=keep_logprobs,
        tokenizer=tokenizer,
        require_exact=require_exact,
        max_length=max_length,
        min_group_size=min_group_size,
        drop_equal_scores=drop_equal_scores,
    )
