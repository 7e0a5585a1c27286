"""Why an episode ends early, as the `TraceError` its trace records."""

from __future__ import annotations

import re

from tracegen.errors import BackendError, BackendTimeout, BackendUnavailable
from tracegen.schema import TraceError

REPEAT_MIN_CHARS = 200
REPEAT_MIN_COPIES = 4
REPEAT_MAX_UNIT = 200
_REPEAT_WINDOW = 4000
_REASON_OVERRIDES = {BackendTimeout: "timeout", BackendUnavailable: "unavailable"}


class EpisodeEnded(Exception):
    """Raised inside a mode to end the episode as a recorded failure."""

    def __init__(self, kind: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.error = TraceError(kind=kind, reason=reason, message=message)  # type: ignore[arg-type]


def limit_reached(reason: str, message: str) -> EpisodeEnded:
    return EpisodeEnded("limit", reason, message)


def unreadable_twice(reason: str) -> EpisodeEnded:
    """The model's tool call could not be read, again right after being told so."""
    return EpisodeEnded("parse", "tool_call", f"two tool calls in a row unreadable: {reason}")


def backend_failure(e: BackendError) -> TraceError:
    """``kind="backend"`` with the exception class as reason (``Overloaded`` → ``overloaded``)."""
    cls = type(e)
    reason = _REASON_OVERRIDES.get(cls) or re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
    return TraceError(kind="backend", reason=reason, message=str(e) or cls.__name__)


def repeated_tail(text: str) -> bool:
    """Whether ``text`` ends in ≥ 4 copies of one unit (≤ 200 chars) covering ≥ 200 chars."""
    tail = text[-_REPEAT_WINDOW:]
    n = len(tail)
    for unit_len in range(1, min(REPEAT_MAX_UNIT, n // REPEAT_MIN_COPIES) + 1):
        unit = tail[n - unit_len :]
        copies = 1
        while (copies + 1) * unit_len <= n and (
            tail[n - (copies + 1) * unit_len : n - copies * unit_len] == unit
        ):
            copies += 1
        if copies >= REPEAT_MIN_COPIES and copies * unit_len >= REPEAT_MIN_CHARS:
            return True
    return False
