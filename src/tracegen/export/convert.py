"""`tracegen convert`: traces into training records of one format (see
`tracegen.export.registry`): chat, ShareGPT, single-message, RL rollouts, tokenized SFT.

This is the command: its options checked, its outputs chosen and checked, the conversion run
(`tracegen.export.pipeline`, one pass over the input for every output), the dataset card
written, the summary printed.
"""

from __future__ import annotations

from pathlib import Path

from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.export.builder import ConvertCounts, ConvertOptions
from tracegen.export.card import write_card
from tracegen.export.outputs import OutputKind
from tracegen.export.pipeline import convert_file
from tracegen.export.registry import check_options, choose_format
from tracegen.jsonl import check_outputs, iter_lines, special_file, special_file_warning
from tracegen.terminal import console as safe_console


def _check_target(target: Path, *, dataset: bool) -> None:
    """Refuse to replace a directory that is not a dataset tracegen could have written."""
    if dataset and (target.is_file() or special_file(target)):
        kind = special_file(target) or "a file"
        raise OutputError(f"{target}: is {kind}, --to-hf needs a directory")
    if not dataset and target.is_dir():
        raise OutputError(f"{target}: is a directory, expected a file name")
    foreign = not (target / "dataset_info.json").is_file()
    if dataset and target.is_dir() and any(target.iterdir()) and foreign:
        raise OutputError(f"{target}: exists and is not a Hugging Face dataset, not replacing it")


def default_output(source: Path, fmt: str) -> Path:
    """``traces.jsonl`` → ``traces.chat.jsonl`` beside it."""
    name = source.name.removesuffix(".gz").removesuffix(".jsonl")
    return source.with_name(f"{name}.{fmt}.jsonl")


def convert_command(
    *,
    input: Path,
    formats: list[str],
    output: Path | None = None,
    to_hf: Path | None = None,
    parquet: Path | None = None,
    only_success: bool = False,
    only_ideal: bool = False,
    reasoning_field: bool = False,
    keep_logprobs: bool = False,
    tokenizer: Path | None = None,
    require_exact: bool = False,
    max_length: int | None = None,
    min_group_size: int | None = None,
    drop_equal_scores: bool = False,
) -> ConvertCounts:
    """Convert ``input`` to every requested output in the one format ``formats`` names by
    flag (``--chat-format``, ``--rl trl``…); print a one-line summary on stderr."""
    fmt = choose_format(formats)
    given = {"--reasoning-field": reasoning_field, "--keep-logprobs": keep_logprobs}
    given |= {"--tokenizer": tokenizer is not None, "--require-exact": require_exact}
    given |= {"--max-length": max_length is not None}
    given |= {"--min-group-size": min_group_size is not None}
    check_options(fmt, given | {"--drop-equal-scores": drop_equal_scores})
    for flag, value in (("--max-length", max_length), ("--min-group-size", min_group_size)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value}: must be at least 1")
    if not input.is_file():
        raise InputFileError(f"{input}: no such file")
    if next(iter_lines(input), None) is None:
        raise InputFileError(f"{input}: holds no traces")
    options = ConvertOptions(
        fmt.name,
        only_success,
        only_ideal,
        reasoning_field,
        keep_logprobs,
        tokenizer,
        require_exact,
        max_length,
        min_group_size,
        drop_equal_scores,
    )
    if output is None and to_hf is None and parquet is None:
        output = default_output(input, fmt.name)
    asked: dict[OutputKind, Path | None] = {"jsonl": output, "parquet": parquet, "hf": to_hf}
    targets = {kind: path for kind, path in asked.items() if path is not None}
    check_outputs([input], output, parquet)
    check_outputs([input], to_hf, folder=True)
    for kind, target in targets.items():
        _check_target(target, dataset=kind == "hf")
    console = safe_console(stderr=True, highlight=False)
    for warning in filter(None, map(special_file_warning, targets.values())):
        console.print(f"tracegen: warning: {warning}", markup=False, soft_wrap=True)
    counts = convert_file(input, targets, options)
    if "hf" in targets:
        write_card(targets["hf"], input, options, counts, fields=fmt.fields)
    console.print(counts.summary(options), markup=False, soft_wrap=True)
    for warning in counts.warnings:
        console.print(f"tracegen: warning: {warning}", markup=False, soft_wrap=True)
    return counts
