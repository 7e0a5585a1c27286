"""``tool-feedback``: think + code, stop; the code runs; ``<result>``/``<error>`` goes back."""

from __future__ import annotations

from tracegen.modes.common import FeedbackLoop, turn_kinds
from tracegen.modes.grammars import THINK_CODE
from tracegen.schema import Trace


class ToolFeedback(FeedbackLoop):
    name = "tool-feedback"
    grammar = THINK_CODE
    constrain_auto = True

    def structure_ok(self, trace: Trace) -> bool:
        """Every turn thinks, then writes code (a math problem's last turn: the answer)."""
        turns = turn_kinds(trace)
        if trace.final_answer is not None:
            turns = turns[:-1]
        return all(
            "think" in k and "code" in k and k.index("think") < k.index("code") for k in turns
        )
