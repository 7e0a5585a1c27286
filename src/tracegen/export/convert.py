"""`tracegen convert`: stream traces into chat, ShareGPT or single-message training files.

Each output is written to a temporary name and renamed when complete, so a failed
conversion leaves no half-written file and a second run replaces the first.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tracegen.errors import (
    ConfigError,
    InputFileError,
    MissingExtraError,
    OutputError,
    TracegenError,
)
from tracegen.export.formats import Format, Row, convert_trace, features, is_convertible
from tracegen.jsonl import JsonlWriter, iter_lines, iter_records
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

PARQUET_BATCH = 500


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


def iter_converted(
    path: Path, options: ConvertOptions, counts: ConvertCounts | None = None
) -> Iterator[Row]:
    """Output records of the traces in ``path`` that pass the filters, one at a time."""
    counts = counts if counts is not None else ConvertCounts()
    for _, trace in iter_records(path, Trace):
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
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it on success, vanishes on failure."""
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
    if dataset and target.is_file():
        raise OutputError(f"{target}: is a file, --to-hf needs a directory")
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


def write_jsonl(rows: Iterator[Row], target: Path) -> None:
    with _replacing(target) as tmp, JsonlWriter(tmp) as writer:
        for row in rows:
            writer.write(row)


def write_parquet(rows: Iterator[Row], target: Path, features: Features) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("--parquet needs pyarrow: pip install pyarrow") from None
    schema = features.arrow_schema
    with _replacing(target) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) == PARQUET_BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch.clear()
        writer.write_table(pa.Table.from_pylist(batch, schema=schema))


def _hf_rows(path: str, options: ConvertOptions) -> Iterator[Row]:
    yield from iter_converted(Path(path), options)


def write_hf(
    rows: Callable[..., Iterator[Row]], kwargs: dict[str, Any], target: Path, features: Features
) -> None:
    """``save_to_disk`` a dataset of the records ``rows(**kwargs)`` streams, built with
    ``from_generator`` (``kwargs`` must pickle)."""
    import datasets

    datasets.disable_progress_bars()
    with _replacing(target) as tmp, tempfile.TemporaryDirectory(dir=tmp.parent) as cache:
        try:
            dataset = datasets.Dataset.from_generator(
                rows,
                features=features,
                gen_kwargs=kwargs,
                cache_dir=cache,
            )
        except Exception as e:
            cause = e.__cause__ or e.__context__
            if isinstance(cause, TracegenError | OSError):
                raise cause from None
            if next(rows(**kwargs), None) is not None:
                raise
            # Nothing passed the filters: `from_generator` cannot build a dataset of no rows,
            # and an empty one saved without an explicit shard does not load.
            empty = datasets.Dataset.from_dict({name: [] for name in features}, features=features)
            empty.save_to_disk(str(tmp), num_shards=1)
            return
        dataset.save_to_disk(str(tmp))
        del dataset


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
        raise ConfigError(
            "choose exactly one of --chat-format, --sharegpt, --training-format, --rl, --tokenized"
        )
    return chosen[0]


def default_output(source: Path, fmt: str) -> Path:
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
    targets = [p for p in (output, parquet, to_hf) if p is not None]
    if any(p.resolve() == input.resolve() for p in targets):
        raise ConfigError(f"{input}: output would overwrite the input")
    for target in targets:
        _check_target(target, dataset=target is to_hf)
    counts = ConvertCounts()
    if output is not None:
        write_jsonl(iter_converted(input, options, counts), output)
    if parquet is not None:
        rows = iter_converted(input, options, None if output else counts)
        write_parquet(rows, parquet, _features(options))
    if to_hf is not None:
        write_hf(_hf_rows, {"path": str(input), "options": options}, to_hf, _features(options))
        if output is None and parquet is None:
            for _ in iter_converted(input, options, counts):
                pass
    counts.outputs = [str(p) for p in targets]
    Console(stderr=True, highlight=False).print(
        counts.summary(options), markup=False, soft_wrap=True
    )
    return counts
