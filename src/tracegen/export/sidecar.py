"""The record of curation steps kept beside a trace file: ``TRACES.tracegen.json``.

`tracegen dedup` and `tracegen decontaminate` write it next to their output, listing the
steps applied so far (those recorded beside their input first), so that `tracegen convert
--to-hf` can state in the dataset card what was filtered out and how.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tracegen.errors import InputFileError

CURATION_SCHEMA = "tracegen.curation/1"
SIDECAR_SUFFIX = ".tracegen.json"


def sidecar_path(traces: Path) -> Path:
    """``traces.jsonl`` → ``traces.jsonl.tracegen.json``."""
    return traces.with_name(traces.name + SIDECAR_SUFFIX)


def read_steps(traces: Path) -> list[dict[str, Any]]:
    """The curation steps recorded beside ``traces``; none when there is no record."""
    path = sidecar_path(traces)
    if not path.is_file():
        return []
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise InputFileError(f"{path}: not a curation record: {e}") from None
    if not isinstance(record, dict) or record.get("schema") != CURATION_SCHEMA:
        raise InputFileError(f"{path}: not a {CURATION_SCHEMA} record")
    return list(record.get("steps") or [])
