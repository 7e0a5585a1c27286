"""Which traces are kept: the one accept rule `run` and `convert` share.

Every episode the model ended — it finished, or ran out of a budget (``limit``), or wrote tool
calls that could not be read (``parse``) — is a sample: kept in the output, where stats, pass@k
and RL groups count it, unless a filter the user asked for rejects it. An episode that failed
because of the server, the sandbox or tracegen (`infrastructure_failure`) says nothing of the
model: it is ``failed``, kept out of the output (recorded in the rejects file and the state)
and run again when the run is resumed (`tracegen.generate.runfiles`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tracegen.schema import Trace

Outcome = Literal["accepted", "rejected", "failed"]

MODEL_ENDINGS = frozenset({"limit", "parse"})
"""The `TraceError` kinds the model caused: its episode is a sample like any other."""
NOT_THE_MODELS = frozenset({"backend", "sandbox", "internal"})
"""The `TraceError` kinds that say nothing of the model (a server that failed, a sandbox or
tracegen fault): their reward is no signal, so no output or format keeps them."""


def infrastructure_failure(trace: Trace) -> bool:
    """Whether the episode failed because of the server, the sandbox or tracegen."""
    return trace.error is not None and trace.error.kind in NOT_THE_MODELS


def failed_row(row: Mapping[str, Any]) -> bool:
    """`infrastructure_failure` of a trace as read from a file, undecoded."""
    error = row.get("error")
    return isinstance(error, dict) and error.get("kind") in NOT_THE_MODELS


@dataclass(frozen=True)
class Filters:
    """``--only-success`` / ``--only-ideal``."""

    only_success: bool = False
    only_ideal: bool = False

    def outcome(self, trace: Trace) -> Outcome:
        """``failed`` for an episode the server, sandbox or tracegen failed; ``accepted``
        when it passes the filters, else ``rejected``."""
        if infrastructure_failure(trace):
            return "failed"
        if (self.only_success and not trace.success) or (self.only_ideal and not trace.is_ideal):
            return "rejected"
        return "accepted"

    @property
    def flag(self) -> str:
        """The flag that rejects, for summaries."""
        return "--only-ideal" if self.only_ideal else "--only-success"
