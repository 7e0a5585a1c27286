"""Find the shipped `prompts/` and `problems/` folders, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

from tracegen.errors import TracegenError

_PACKAGE = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """The folder ``name`` (``prompts`` or ``problems``) shipped with tracegen."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE.parent.parent / name
    if checkout.is_dir():
        return checkout
    raise TracegenError(f"tracegen's {name}/ folder is missing from this installation")
