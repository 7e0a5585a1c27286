"""``structured``: plan → action (code) → reflection on the real result, iterated."""

from __future__ import annotations

import re

from tracegen.episode.session import Session
from tracegen.modes.common import FeedbackLoop, add_feedback, tag_turn, turn_kinds
from tracegen.modes.grammars import PLAN_CODE, REFLECTION
from tracegen.schema import ExecResult, Trace

_LETTERS = {"plan": "p", "code": "c", "reflection": "r"}
_SHAPE = re.compile(r"pc(rpc)*r")


class Structured(FeedbackLoop):
    """The execute-and-fix loop with ``<plan>`` and ``<reflection>``; after the tests pass
    the model sees the result and writes a last reflection."""

    name = "structured"
    grammar = PLAN_CODE

    async def after_success(self, session: Session, result: ExecResult) -> None:
        add_feedback(session, result)
        await tag_turn(session, ("reflection",), REFLECTION)

    def structure_ok(self, trace: Trace) -> bool:
        """plan, code, then (reflection, plan, code)… and a final reflection."""
        kinds = [k for turn in turn_kinds(trace) for k in turn if k in _LETTERS]
        shape = "".join(_LETTERS[k] for k in kinds)
        return _SHAPE.fullmatch(shape) is not None
