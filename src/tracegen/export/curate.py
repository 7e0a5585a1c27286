"""What the curation commands (`dedup`, `decontaminate`) share: checking paths, writing
the kept lines atomically, and recording each step beside the output (`export.sidecar`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from tracegen import __version__
from tracegen.errors import InputFileError, OutputError
from tracegen.export.pipeline import replacing
from tracegen.export.sidecar import CURATION_SCHEMA, read_steps, sidecar_path
from tracegen.jsonl import check_outputs


def step(name: str, source: Path, **details: Any) -> dict[str, Any]:
    """One step's record: what ran, on which file, when, with which tracegen."""
    return {
        "step": name,
        "input": str(source),
        "tracegen": __version__,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        **details,
    }


def check_paths(source: Path, *targets: Path | None) -> None:
    """The input exists and no output would overwrite it."""
    if not source.is_file():
        raise InputFileError(f"{source}: no such file")
    check_outputs([source], *targets)
    for target in targets:
        if target is None:
            continue
        if target.is_dir():
            raise OutputError(f"{target}: is a directory, expected a file name")


@contextlib.contextmanager
def writing(target: Path, source: Path, record: dict[str, Any]) -> Iterator[IO[bytes]]:
    """A file to write the kept lines to; on success it replaces ``target`` and the steps of
    ``source`` plus ``record`` (which the caller fills in meanwhile) are written beside it."""
    with replacing(target) as tmp, tmp.open("wb") as out:
        yield out
    steps = [*read_steps(source), record]
    document = {"schema": CURATION_SCHEMA, "output": str(target), "steps": steps}
    with replacing(sidecar_path(target)) as tmp:
        tmp.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))


@contextlib.contextmanager
def optional_jsonl(target: Path | None) -> Iterator[IO[bytes] | None]:
    """An atomically replaced side file (``--dropped``), or None when not asked for."""
    if target is None:
        yield None
        return
    with replacing(target) as tmp, tmp.open("wb") as out:
        yield out
