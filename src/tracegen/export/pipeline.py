"""The one pass of `tracegen convert`: the traces of a file read (their logprobs only when the
format reads them), filtered, made into records by a format's `Builder`, and written to
every output asked for at once (see `tracegen.export.outputs`). Each output is written to a
temporary name and renamed when complete, so a failed conversion leaves no half-written file
and a second run replaces the first.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from functools import cache
from itertools import islice
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tracegen.errors import ConfigError, OutputError
from tracegen.export.builder import (
    Builder,
    ConvertCounts,
    ConvertOptions,
    Row,
    Skipped,
    is_convertible,
)
from tracegen.export.outputs import OUTPUTS, Batch, Output, OutputKind
from tracegen.export.registry import FORMATS
from tracegen.grading.filters import NOT_THE_MODELS
from tracegen.jsonl import iter_raw_lines, special_file, validate
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
            counts.unsuccessful += not trace.success
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
