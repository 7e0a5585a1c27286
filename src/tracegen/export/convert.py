"""`tracegen convert`: stream traces into training records of one format (see
`tracegen.export.registry`): chat, ShareGPT, single-message, RL rollouts, tokenized SFT.

One pass over the input feeds every output asked for (see `tracegen.export.outputs`).
Logprobs, most of a trace's bytes, are skipped while reading unless the format reads them.
Each output is written to a temporary name and renamed when complete, so a failed
conversion leaves no half-written file and a second run replaces the first.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from functools import cache
from itertools import islice
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.export.card import write_card
from tracegen.export.conversion import (
    NOT_THE_MODELS,
    Builder,
    ConvertCounts,
    ConvertOptions,
    Row,
    Skipped,
    is_convertible,
)
from tracegen.export.outputs import OUTPUTS, Batch, Output, OutputKind
from tracegen.export.registry import FORMATS, check_options, choose_format
from tracegen.jsonl import (
    iter_lines,
    iter_raw_lines,
    special_file,
    special_file_warning,
    validate,
)
from tracegen.schema import Trace


class _SkippedTurn(BaseModel):
    """A turn of logprobs read past: its tokens are never built."""

    model_config = ConfigDict(extra="ignore")


class _TraceWithoutLogprobs(Trace):
    """A `Trace` whose logprobs are only checked to be a list of objects."""

    logprobs: list[_SkippedTurn] = Field(default_factory=list)  # type: ignore[assignment]


def iter_traces(path: Path, *, keep_logprobs: bool) -> Iterator[tuple[int, Trace]]:
    """The traces of ``path`` with their line numbers, validated; their logprobs only when
    ``keep_logprobs``."""
    model = Trace if keep_logprobs else _TraceWithoutLogprobs
    for lineno, raw in iter_raw_lines(path):
        yield lineno, validate(raw, model, path, lineno, name="Trace")


def iter_converted(
    path: Path, builder: Builder, options: ConvertOptions, counts: ConvertCounts
) -> Iterator[Row]:
    """The records ``builder`` makes of the traces in ``path`` that pass the filters, one at
    a time (before `Builder.gather`)."""
    keeps_failures = builder.keeps_failures and not options.only_success
    for lineno, trace in iter_traces(path, keep_logprobs=builder.reads_logprobs):
        error = trace.error
        if error is not None and not keeps_failures:
            counts.failed += 1
        elif error is not None and error.kind in NOT_THE_MODELS:
            counts.outside_model[f"{error.kind}/{error.reason}"] += 1
        elif error is not None and not is_convertible(trace):
            counts.no_model_token += 1
        elif (options.only_success and not trace.success) or (
            options.only_ideal and not trace.is_ideal
        ):
            counts.filtered += 1
        elif not is_convertible(trace):
            counts.incomplete += 1
        else:
            try:
                rows = builder.rows(trace)
            except Skipped as why:
                counts.skip(trace, why)
                continue
            except ConfigError as e:
                raise ConfigError(f"{path}:{lineno}: {e}") from None
            counts.converted += 1
            if error is not None:
                counts.kept_failures[f"{error.kind}/{error.reason}"] += 1
            yield from rows


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it on success, vanishes on failure;
    a FIFO or a device (``-o /dev/null``) is written as it is, never replaced."""
    if special_file(target) is not None:
        yield target
        return
    tmp = target.with_name(f".{target.name}.tmp")
    _remove(tmp)
    try:
        tmp.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        _remove(target)
        tmp.rename(target)
    except OSError as e:
        _remove(tmp)
        raise OutputError(f"{target}: cannot write: {e.strerror or e}") from None
    except BaseException:
        _remove(tmp)
        raise


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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def convert_file(
    source: Path, targets: dict[OutputKind, Path], options: ConvertOptions
) -> ConvertCounts:
    """Write the records of ``source`` to every target in one pass; all or none of them."""
    counts = ConvertCounts(outputs=[str(p) for p in targets.values()])
    fmt = FORMATS[options.fmt]
    feats = cache(lambda: fmt.features(options))
    with contextlib.ExitStack() as stack:
        builder = fmt.builder(options, counts)
        stack.callback(builder.close)
        outputs: list[Output] = []
        for kind, target in targets.items():
            tmp = stack.enter_context(replacing(target))
            make = OUTPUTS[kind]
            output = make(tmp, feats() if make.arrow else None)
            stack.callback(output.close)
            outputs.append(output)
        rows = builder.gather(iter_converted(source, builder, options, counts))
        size = builder.batch_rows if any(o.arrow for o in outputs) else 1
        while chunk := list(islice(rows, size)):
            batch = Batch(chunk, feats)
            for output in outputs:
                output.write(batch)
        counts.detail = builder.summary()
    return counts


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
    if any(p.resolve() == input.resolve() for p in targets.values()):
        raise ConfigError(f"{input}: output would overwrite the input")
    for kind, target in targets.items():
        _check_target(target, dataset=kind == "hf")
    console = Console(stderr=True, highlight=False)
    for warning in filter(None, map(special_file_warning, targets.values())):
        console.print(f"tracegen: warning: {warning}", markup=False, soft_wrap=True)
    counts = convert_file(input, targets, options)
    if "hf" in targets:
        write_card(targets["hf"], input, options, counts, fields=fmt.fields)
    console.print(counts.summary(options), markup=False, soft_wrap=True)
    for warning in counts.warnings:
        console.print(f"tracegen: warning: {warning}", markup=False, soft_wrap=True)
    return counts
