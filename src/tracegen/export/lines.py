"""Trace lines decoded into the lean msgspec structs of a curation pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec

from tracegen.errors import JsonlError
from tracegen.schema import TRACE_SCHEMA

S = TypeVar("S")


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
    return cast(S, record)
