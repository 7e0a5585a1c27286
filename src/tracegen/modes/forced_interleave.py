"""``forced-interleave``: one step per turn (stop after its closing tag) until ``<verify>``."""

from __future__ import annotations

from tracegen.episode.session import Session
from tracegen.modes.base import TracedMode
from tracegen.modes.common import CONTINUE, STEP_TAGS, assembled, interleaved, tag_turn, turn_kinds
from tracegen.modes.grammars import ONE_STEP
from tracegen.schema import Trace


class ForcedInterleave(TracedMode):
    name = "forced-interleave"
    grammar = ONE_STEP

    async def converse(self, session: Session) -> None:
        while not any(s.kind == "verify" for s in await tag_turn(session, STEP_TAGS, self.grammar)):
            session.say("user", CONTINUE)

    def final_code(self, session: Session) -> str | None:
        return assembled(session)

    def structure_ok(self, trace: Trace) -> bool:
        """Interleaved (as markers), at least two code steps, one step in every turn."""
        turns = turn_kinds(trace)
        code_steps = sum(kinds.count("code") for kinds in turns)
        return interleaved(trace) and code_steps >= 2 and all(len(k) == 1 for k in turns)
