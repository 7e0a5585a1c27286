"""``structured``: plan → action (code) → reflection on the real result, iterated."""

from __future__ import annotations

import re

from tracegen.episode.session import Session, turn_kinds
from tracegen.modes.tool_feedback import ToolFeedback
from tracegen.schema import ExecResult, Trace

_LETTERS = {"plan": "p", "code": "c", "reflection": "r"}
_SHAPE = re.compile(r"pc(rpc)*r")


class Structured(ToolFeedback):
    """As tool-feedback with ``<plan>`` and ``<reflection>``; after the tests pass the model
    sees the result and writes a last reflection."""

    name = "structured"

    async def after_success(self, session: Session, result: ExecResult) -> None:
        session.add_feedback(result)
        await session.tag_turn(("reflection",))

    def structure_ok(self, trace: Trace) -> bool:
        """plan, code, then (reflection, plan, code)… and a final reflection."""
        kinds = [k for turn in turn_kinds(trace) for k in turn if k in _LETTERS]
        shape = "".join(_LETTERS[k] for k in kinds)
        return _SHAPE.fullmatch(shape) is not None
