"""The one JSONL reader and writer: orjson, whole lines, crash-safe tail repair."""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from tracegen.errors import InputFileError, JsonlError, OutputError

Row = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


def _short(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        return f"{where}: {first['msg']}"
    return str(err).splitlines()[0]


def _open_binary(path: Path) -> IO[bytes]:
    try:
        if path.suffix == ".gz":
            return cast(IO[bytes], gzip.open(path, "rb"))
        return path.open("rb")
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, not a JSONL file") from None
    except PermissionError:
        raise InputFileError(f"{path}: permission denied") from None


def iter_lines(
    path: str | Path,
    *,
    on_error: Callable[[JsonlError], None] | None = None,
) -> Iterator[tuple[int, Row]]:
    """Yield ``(line_number, object)`` for each non-blank line, lazily.

    A line that is not a JSON object raises `JsonlError` naming ``FILE:LINE``, or is
    passed to ``on_error`` and skipped when a callback is given.
    """
    path = Path(path)
    with _open_binary(path) as fh:
        lineno = 0
        while True:
            try:
                raw = fh.readline()
            except (OSError, EOFError) as e:
                raise InputFileError(f"{path}: cannot read: {e}") from None
            if not raw:
                return
            lineno += 1
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                err = JsonlError(f"{path}:{lineno}: not valid JSON ({_short(e)})")
            else:
                if isinstance(obj, dict):
                    yield lineno, obj
                    continue
                err = JsonlError(
                    f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}"
                )
            if on_error is None:
                raise err
            on_error(err)


def iter_records(
    path: str | Path,
    model: type[M],
    *,
    on_error: Callable[[JsonlError], None] | None = None,
) -> Iterator[tuple[int, M]]:
    """Like `iter_lines`, validating each object as ``model``; schema errors name FILE:LINE."""
    for lineno, obj in iter_lines(path, on_error=on_error):
        try:
            record = validate(obj, model, path, lineno)
        except JsonlError as err:
            if on_error is None:
                raise
            on_error(err)
            continue
        yield lineno, record


def validate(obj: Row, model: type[M], path: str | Path, lineno: int) -> M:
    """``obj`` (read from ``path`` at ``lineno``) as ``model``; `JsonlError` names FILE:LINE."""
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise JsonlError(f"{path}:{lineno}: not a valid {model.__name__}: {_short(e)}") from None


def dumps(record: BaseModel | Row) -> bytes:
    """One JSON line, newline included."""
    if isinstance(record, BaseModel):
        record = record.model_dump(mode="json", by_alias=True)
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def repair_tail(path: str | Path) -> int:
    """Drop a last line cut by a crash (one without its newline). Return bytes dropped."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        block = 1 << 16
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


class JsonlWriter:
    """Append whole records to a JSONL file, one ``write`` per line, flushed each time.

    If a write fails part-way (disk full, file size limit), the partial line is cut off
    again so the file stays valid, and `OutputError` is raised.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise OutputError(f"{self.path}: cannot open for writing: {e.strerror}") from None

    def write(self, record: BaseModel | Row) -> None:
        line = dumps(record)
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            view = memoryview(line)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            if self._fsync:
                os.fsync(self._fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise OutputError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
