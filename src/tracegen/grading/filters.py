"""Which traces are kept: the one accept rule `run` and `convert` share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracegen.schema import Trace

Outcome = Literal["accepted", "rejected", "failed"]


@dataclass(frozen=True)
class Filters:
    """``--only-success`` / ``--only-ideal``."""

    only_success: bool = False
    only_ideal: bool = False

    def outcome(self, trace: Trace) -> Outcome:
        """``failed`` for an episode that ended in an error; ``accepted`` when it passes the
        filters, else ``rejected``."""
        if trace.error is not None:
            return "failed"
        if (self.only_success and not trace.success) or (self.only_ideal and not trace.is_ideal):
            return "rejected"
        return "accepted"

    @property
    def flag(self) -> str:
        """The flag that rejects, for summaries."""
        return "--only-ideal" if self.only_ideal else "--only-success"
