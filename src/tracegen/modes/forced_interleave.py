"""``forced-interleave``: one step per turn (stop after its closing tag) until ``<verify>``."""

from __future__ import annotations

from tracegen.episode.session import Session, TracedMode, turn_kinds
from tracegen.modes.markers import assembled, interleaved
from tracegen.schema import Trace

STEP_TAGS = ("think", "code", "verify")
CONTINUE = "Continue with your next step."


class ForcedInterleave(TracedMode):
    name = "forced-interleave"

    async def converse(self, session: Session) -> None:
        while not any(s.kind == "verify" for s in await session.tag_turn(STEP_TAGS)):
            session.add_message("user", CONTINUE)

    def final_code(self, session: Session) -> str | None:
        return assembled(session)

    def structure_ok(self, trace: Trace) -> bool:
        """Interleaved (as markers), at least two code steps, one step in every turn."""
        turns = turn_kinds(trace)
        code_steps = sum(kinds.count("code") for kinds in turns)
        return interleaved(trace) and code_steps >= 2 and all(len(k) == 1 for k in turns)
