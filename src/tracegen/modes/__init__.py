"""The generation modes: one module per conversation protocol, registered by name.

Adding a mode: a module here with a `TracedMode` subclass decorated with ``@register``, its
import below, and its system prompt in ``prompts/<name>.txt``."""

# ruff: noqa: I001  (the imports register the modes in the order users see them)
from __future__ import annotations

from tracegen.modes import (  # noqa: F401
    markers,
    forced_interleave,
    tool_feedback,
    interleaved_tools,
    inline_tools,
    structured,
    native_tools,
)
from tracegen.modes.base import Mode
from tracegen.modes.registry import get_mode, mode_names

MODE_NAMES = mode_names()

__all__ = ["MODE_NAMES", "Mode", "get_mode"]
