"""The modes by name, in the order users see them; `get_mode` makes one."""

from __future__ import annotations

from collections.abc import Callable

from tracegen.errors import ConfigError
from tracegen.modes.base import Mode
from tracegen.modes.forced_interleave import ForcedInterleave
from tracegen.modes.inline_tools import InlineTools
from tracegen.modes.interleaved_tools import InterleavedTools
from tracegen.modes.markers import Markers
from tracegen.modes.native_tools import NativeTools
from tracegen.modes.structured import Structured
from tracegen.modes.tool_feedback import ToolFeedback

MODES: dict[str, Callable[[], Mode]] = {
    mode.name: mode
    for mode in (
        Markers,
        ForcedInterleave,
        ToolFeedback,
        InterleavedTools,
        InlineTools,
        Structured,
        NativeTools,
    )
}
"""Each mode by the name ``--mode`` takes (its class's ``name``)."""


def mode_names() -> tuple[str, ...]:
    """Every mode's name, in the order users see them."""
    return tuple(MODES)


def get_mode(name: str) -> Mode:
    """The mode called ``name``; an unknown name is a `ConfigError` listing the known ones."""
    try:
        return MODES[name]()
    except KeyError:
        raise ConfigError(f"unknown mode {name!r}; known: {', '.join(MODES)}") from None
