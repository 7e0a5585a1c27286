"""`tracegen convert`: stream traces into chat, ShareGPT or single-message training files.

One pass over the input feeds every output asked for (see `tracegen.export.outputs`).
Logprobs, most of a trace's bytes, are skipped while reading unless ``--keep-logprobs``.
Each output is written to a temporary name and renamed when complete, so a failed
conversion leaves no half-written file and a second run replaces the first.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.export.card import write_card
from tracegen.export.formats import Format, Row, convert_trace, features, is_convertible
from tracegen.export.outputs import ARROW_OUTPUTS, OUTPUTS, Batch, Output, OutputKind
from tracegen.jsonl import (
    iter_lines,
    iter_raw_lines,
    special_file,
    special_file_warning,
    validate,
)
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

BATCH_ROWS = 100
"""Records converted and written together into Parquet or Arrow (a row group, a record
batch); JSONL alone is written a record at a time."""


class _SkippedTurn(BaseModel):
    """A turn of logprobs read past: its tokens are never built."""

    model_config = ConfigDict(extra="ignore")


class _TraceWithoutLogprobs(Trace):
    """A `Trace` whose logprobs are only checked to be a list of objects."""

    logprobs: list[_SkippedTurn] = Field(default_factory=list)  # type: ignore[assignment]


@dataclass(frozen=True)
class ConvertOptions:
    """What `tracegen convert` keeps and how it shapes each record."""

    fmt: Format
    only_success: bool = False
    only_ideal: bool = False
    reasoning_field: bool = False
    keep_logprobs: bool = False


@dataclass
class ConvertCounts:
    converted: int = 0
    failed: int = 0
    filtered: int = 0
    incomplete: int = 0
    outputs: list[str] = field(default_factory=list)

    def summary(self, options: ConvertOptions) -> str:
        skipped = []
        if self.failed:
            skipped.append(f"{self.failed} failed episodes")
        if self.filtered:
            flag = "--only-ideal" if options.only_ideal else "--only-success"
            skipped.append(f"{self.filtered} filtered by {flag}")
        if self.incomplete:
            skipped.append(f"{self.incomplete} without an assistant turn")
        text = f"converted {self.converted} traces ({options.fmt}) → {', '.join(self.outputs)}"
        return text + (f"; skipped {', '.join(skipped)}" if skipped else "")


def iter_traces(path: Path, *, keep_logprobs: bool) -> Iterator[Trace]:
    """The traces of ``path``, validated; their logprobs only when ``keep_logprobs``."""
    model = Trace if keep_logprobs else _TraceWithoutLogprobs
    for lineno, raw in iter_raw_lines(path):
        yield validate(raw, model, path, lineno, name="Trace")


def iter_converted(path: Path, options: ConvertOptions, counts: ConvertCounts) -> Iterator[Row]:
    """Output records of the traces in ``path`` that pass the filters, one at a time."""
    for trace in iter_traces(path, keep_logprobs=options.keep_logprobs):
        if trace.error is not None:
            counts.failed += 1
        elif (options.only_success and not trace.success) or (
            options.only_ideal and not trace.is_ideal
        ):
            counts.filtered += 1
        elif not is_convertible(trace):
            counts.incomplete += 1
        else:
            counts.converted += 1
            yield convert_trace(
                trace,
                options.fmt,
                reasoning_field=options.reasoning_field,
                keep_logprobs=options.keep_logprobs,
            )


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
    feats = cache(lambda: _features(options))
    with contextlib.ExitStack() as stack:
        outputs: list[Output] = []
        for kind, target in targets.items():
            tmp = stack.enter_context(replacing(target))
            output = OUTPUTS[kind](tmp, feats() if kind in ARROW_OUTPUTS else None)
            stack.callback(output.close)
            outputs.append(output)
        rows = iter_converted(source, options, counts)
        size = BATCH_ROWS if ARROW_OUTPUTS & targets.keys() else 1
        while chunk := list(islice(rows, size)):
            batch = Batch(chunk, feats)
            for output in outputs:
                output.write(batch)
    return counts


def _features(options: ConvertOptions) -> Features:
    return features(
        options.fmt, reasoning_field=options.reasoning_field, keep_logprobs=options.keep_logprobs
    )


def _choose_format(chat_format: bool, sharegpt: bool, training_format: bool) -> Format:
    flags: dict[Format, bool] = {
        "chat": chat_format,
        "sharegpt": sharegpt,
        "training": training_format,
    }
    chosen = [name for name, on in flags.items() if on]
    if len(chosen) != 1:
        raise ConfigError("choose exactly one of --chat-format, --sharegpt, --training-format")
    return chosen[0]


def default_output(source: Path, fmt: Format) -> Path:
    """``traces.jsonl`` → ``traces.chat.jsonl`` beside it."""
    name = source.name.removesuffix(".gz").removesuffix(".jsonl")
    return source.with_name(f"{name}.{fmt}.jsonl")


def convert_command(
    *,
    input: Path,
    output: Path | None = None,
    chat_format: bool = False,
    sharegpt: bool = False,
    training_format: bool = False,
    to_hf: Path | None = None,
    parquet: Path | None = None,
    only_success: bool = False,
    only_ideal: bool = False,
    reasoning_field: bool = False,
    keep_logprobs: bool = False,
) -> ConvertCounts:
    """Convert ``input`` to every requested output; print a one-line summary on stderr."""
    fmt = _choose_format(chat_format, sharegpt, training_format)
    if reasoning_field and fmt != "chat":
        raise ConfigError("--reasoning-field applies to --chat-format only")
    if not input.is_file():
        raise InputFileError(f"{input}: no such file")
    if next(iter_lines(input), None) is None:
        raise InputFileError(f"{input}: holds no traces")
    options = ConvertOptions(fmt, only_success, only_ideal, reasoning_field, keep_logprobs)
    if output is None and to_hf is None and parquet is None:
        output = default_output(input, fmt)
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
        write_card(targets["hf"], input, options, counts)
    console.print(counts.summary(options), markup=False, soft_wrap=True)
    return counts
