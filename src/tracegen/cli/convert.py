"""`tracegen convert`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracegen.cli.app import app


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
) -> None:
    """Turn traces into chat, ShareGPT or single-message training files, JSONL/HF/Parquet."""
    from tracegen.export.convert import convert_command

    convert_command(
        input=input,
        output=output,
        chat_format=chat_format,
        sharegpt=sharegpt,
        training_format=training_format,
        to_hf=to_hf,
        parquet=parquet,
        only_success=only_success,
        only_ideal=only_ideal,
        reasoning_field=reasoning_field,
        keep_logprobs=keep_logprobs,
    )
