"""The generation modes: one module per conversation protocol, listed by name in `MODES`.

Adding a mode: a module here with a `TracedMode` subclass, its entry in
`tracegen.modes.registry.MODES`, and its system prompt in ``prompts/<name>.txt``."""

from __future__ import annotations

from tracegen.modes.base import Mode
from tracegen.modes.registry import MODES, get_mode, mode_names

MODE_NAMES = mode_names()

__all__ = ["MODES", "MODE_NAMES", "Mode", "get_mode", "mode_names"]
