"""`tracegen convert`: its format flags are made from the formats' registry
(`tracegen.export.registry.FORMATS`), each with the help its entry declares."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from tracegen.cli.app import PanelCommand, app
from tracegen.export.registry import TOKENS, VALUED, flag_help, flags


def _parameter(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _format_options() -> list[inspect.Parameter]:
    """One option per flag of the registry: a switch, or (``--rl``) a flag taking a value."""
    out = []
    for flag, formats in flags().items():
        option = typer.Option(flag, help=flag_help(flag), rich_help_panel=formats[0].panel)
        kind: Any = str | None if flag in VALUED else bool
        out.append(
            inspect.Parameter(
                _parameter(flag),
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=None if flag in VALUED else False,
                annotation=Annotated[kind, option],
            )
        )
    return out


def convert(
    input: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="JSONL output [default: IN.<format>.jsonl]."),
    ] = None,
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
    **asked: Any,
) -> None:
    """Turn traces into chat, ShareGPT, single-message, RL or tokenized training data,
    JSONL/HF/Parquet."""
    from tracegen.export.convert import convert_command

    formats = []
    for flag in flags():
        value = asked[_parameter(flag)]
        if value:
            formats.append(f"{flag} {value}" if flag in VALUED else flag)
    convert_command(
        input=input,
        formats=formats,
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


_own = list(inspect.signature(convert, eval_str=True).parameters.values())[:-1]
convert.__signature__ = inspect.Signature([*_own[:2], *_format_options(), *_own[2:]])  # type: ignore[attr-defined]
app.command(cls=PanelCommand)(convert)
