"""``markers``: one request; the model interleaves think/code/verify, the program runs once."""

from __future__ import annotations

from tracegen.episode.session import Session, TracedMode
from tracegen.parsing.program import Program
from tracegen.schema import Trace


def assembled(session: Session) -> str | None:
    """The program the model's code blocks add up to (see `Program`)."""
    program = Program()
    for block in session.model_code():
        program.add(block)
    return program.text or None


def interleaved(trace: Trace, min_thinks: int = 2) -> bool:
    """At least ``min_thinks`` think steps, code after a think, verify after the last code."""
    kinds = [s.kind for s in trace.steps if s.source == "model"]
    if kinds.count("think") < min_thinks or "code" not in kinds or "verify" not in kinds:
        return False
    first_code = kinds.index("code")
    last_code = len(kinds) - 1 - kinds[::-1].index("code")
    return "think" in kinds[:first_code] and "verify" in kinds[last_code:]


class Markers(TracedMode):
    name = "markers"

    async def converse(self, session: Session) -> None:
        await session.tag_turn()

    def final_code(self, session: Session) -> str | None:
        return assembled(session)

    def structure_ok(self, trace: Trace) -> bool:
        return interleaved(trace)
