"""The modes by name: each mode module registers its class; `get_mode` looks one up."""

from __future__ import annotations

from collections.abc import Callable

from tracegen.errors import ConfigError
from tracegen.modes.base import Mode

_MODES: dict[str, Callable[[], Mode]] = {}


def register(cls: type[Mode]) -> type[Mode]:
    """Class decorator: make the mode available as ``--mode <cls.name>``."""
    _MODES[cls.name] = cls
    return cls


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order."""
    return tuple(_MODES)


def get_mode(name: str) -> Mode:
    """The mode called ``name``; an unknown name is a `ConfigError` listing the known ones."""
    try:
        return _MODES[name]()
    except KeyError:
        raise ConfigError(f"unknown mode {name!r}; known: {', '.join(_MODES)}") from None
