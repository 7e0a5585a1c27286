"""The generation modes: one module per conversation protocol, and the registry."""

from __future__ import annotations

from tracegen.episode.spec import Episode, Mode
from tracegen.errors import ConfigError

MODE_NAMES = (
    "markers",
    "forced-interleave",
    "tool-feedback",
    "interleaved-tools",
    "inline-tools",
    "structured",
    "native-tools",
)

__all__ = ["MODE_NAMES", "Episode", "Mode", "get_mode"]


def get_mode(name: str) -> Mode:
    """The mode called ``name``; an unknown name is a `ConfigError` listing the known ones."""
    if name not in MODE_NAMES:
        raise ConfigError(f"unknown mode {name!r}; known: {', '.join(MODE_NAMES)}")
    from tracegen.modes.forced_interleave import ForcedInterleave
    from tracegen.modes.inline_tools import InlineTools
    from tracegen.modes.interleaved_tools import InterleavedTools
    from tracegen.modes.markers import Markers
    from tracegen.modes.native_tools import NativeTools
    from tracegen.modes.structured import Structured
    from tracegen.modes.tool_feedback import ToolFeedback

    modes: list[Mode] = [
        Markers(),
        ForcedInterleave(),
        ToolFeedback(),
        InterleavedTools(),
        InlineTools(),
        Structured(),
        NativeTools(),
    ]
    return next(m for m in modes if m.name == name)
