"""JSONL lines as bytes, with where each starts, for passes that decode only a few fields.

`tracegen.jsonl` reads whole records; the curation and report passes instead decode each
line with a msgspec struct of the fields they need (and copy kept lines byte for byte), so
they read raw lines here: plain or ``.gz``, blank lines skipped, errors naming the file.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import msgspec

from tracegen.errors import InputFileError, JsonlError
from tracegen.schema import TRACE_SCHEMA

S = TypeVar("S")


def open_binary(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, gzip-decoded when it ends in ``.gz``."""
    try:
        if path.suffix == ".gz":
            return cast(IO[bytes], gzip.open(path, "rb"))
        return path.open("rb")
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, not a JSONL file") from None
    except OSError as e:
        raise InputFileError(f"{path}: cannot read: {e.strerror or e}") from None


def iter_raw(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, byte_offset, line)`` for each non-blank line of ``path``."""
    with open_binary(path) as fh:
        offset = 0
        try:
            for lineno, raw in enumerate(fh, 1):
                start = offset
                offset += len(raw)
                if raw.strip():
                    yield lineno, start, raw
        except (OSError, EOFError) as e:
            raise InputFileError(f"{path}: cannot read: {e}") from None


def decode_trace(decoder: msgspec.json.Decoder[S], raw: bytes, path: Path, lineno: int) -> S:
    """One trace line decoded by ``decoder`` (a struct with a ``schema`` field);
    `JsonlError` naming ``FILE:LINE`` when it is not JSON or not a trace."""
    try:
        record: Any = decoder.decode(raw)
    except msgspec.ValidationError as e:
        raise JsonlError(f"{path}:{lineno}: not a trace: {e}") from None
    except msgspec.DecodeError as e:
        raise JsonlError(f"{path}:{lineno}: not valid JSON ({e})") from None
    if record.schema != TRACE_SCHEMA:
        raise JsonlError(
            f"{path}:{lineno}: not a {TRACE_SCHEMA} record (schema: {record.schema!r})"
        )
    return record
