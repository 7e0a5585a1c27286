"""`tracegen convert`: traces into training records of one format (see
`tracegen.export.registry`): chat, ShareGPT, single-message, RL rollouts, tokenized SFT.

This is the command: its options checked, its outputs chosen and checked, the conversion run
(`tracegen.export.pipeline`, one pass over the input for every output), the dataset card
written, the summary printed.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.export.builder import ConvertCounts, ConvertOptions
from tracegen.export.card import write_card
from tracegen.export.outputs import OutputKind
from tracegen.export.pipeline import convert_file
from tracegen.export.registry import check_options, choose_format
from tracegen.jsonl import check_outputs, iter_lines, special_file, special_file_warning
from tracegen.terminal import console as safe_console
from tracegen.terminal import printable

MARKER = ".tracegen-dataset.json"
"""Written last into every ``--to-hf`` folder: the files tracegen wrote there. A folder is
replaced only when it is empty or holds this marker and no file it does not list."""
MARKER_SCHEMA = "tracegen.dataset/1"


def _written(target: Path) -> set[str] | None:
    """The files the marker of ``target`` lists, or None when it has no readable marker."""
    try:
        data = orjson.loads((target / MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MARKER_SCHEMA:
        return None
    files = data.get("files")
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def _check_target(target: Path, *, dataset: bool) -> None:
    """Refuse to replace a directory tracegen did not write, or holding files it did not."""
    if dataset and (target.is_file() or special_file(target)):
        kind = special_file(target) or "a file"
        raise OutputError(f"{target}: is {kind}, --to-hf needs a directory")
    if not dataset and target.is_dir():
        raise OutputError(f"{target}: is a directory, expected a file name")
    if not (dataset and target.is_dir()):
        return
    present = {p.name for p in target.iterdir()}
    if not present:
        return
    written = _written(target)
    if written is None:
        raise OutputError(
            f"{target}: exists and is not a dataset tracegen wrote (no {MARKER}), not replacing it"
        )
    others = sorted(present - written - {MARKER})
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        raise OutputError(
            f"{target}: holds {printable(others[0])}{more}, which tracegen did not write; "
            "not replacing it"
        )


def _mark(target: Path) -> None:
    """Write the marker listing every file now in the dataset folder ``target``."""
    files = sorted(p.name for p in target.iterdir() if p.name != MARKER)
    marker = {"schema": MARKER_SCHEMA, "files": files}
    (target / MARKER).write_bytes(orjson.dumps(marker, option=orjson.OPT_INDENT_2) + b"\n")


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
        _mark(targets["hf"])
    console.print(counts.summary(options), markup=False, soft_wrap=True)
    for warning in counts.warnings:
        console.print(f"tracegen: warning: {warning}", markup=False, soft_wrap=True)
    return counts
