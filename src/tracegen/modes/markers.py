"""``markers``: one request; the model interleaves think/code/verify, the program runs once."""

from __future__ import annotations

from tracegen.episode.session import Session
from tracegen.modes.base import TracedMode
from tracegen.modes.common import assembled, interleaved, tag_turn
from tracegen.modes.grammars import MARKERS
from tracegen.schema import Trace


class Markers(TracedMode):
    name = "markers"
    grammar = MARKERS
    constrain_auto = True

    async def converse(self, session: Session) -> None:
        await tag_turn(session, grammar=self.grammar)

    def final_code(self, session: Session) -> str | None:
        return assembled(session)

    def structure_ok(self, trace: Trace) -> bool:
        return interleaved(trace)
