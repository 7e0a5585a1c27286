"""``interleaved-tools``: one step per turn, 1–3 line code blocks accumulated; a complete
program runs and its result goes back; fix attempts follow."""

from __future__ import annotations

from tracegen.episode.session import Session
from tracegen.modes.base import TracedMode
from tracegen.modes.common import CONTINUE, STEP_TAGS, add_feedback, assembled, tag_turn
from tracegen.modes.grammars import ONE_STEP
from tracegen.parsing.program import is_complete
from tracegen.schema import Trace

MAX_BLOCK_LINES = 3


class InterleavedTools(TracedMode):
    """Code problems end when the tests pass; math problems at the model's ``<verify>``."""

    name = "interleaved-tools"
    grammar = ONE_STEP

    async def converse(self, session: Session) -> None:
        last_run = ""
        while True:
            steps = await tag_turn(session, STEP_TAGS, self.grammar)
            if not session.tested and any(s.kind == "verify" for s in steps):
                return
            program = assembled(session) or ""
            code = [s for s in steps if s.kind == "code"]
            if (
                not code
                or program == last_run
                or not is_complete(program, session.problem.entry_point)
            ):
                session.say("user", CONTINUE)
                continue
            last_run = program
            result = await session.runs.execute(program)
            code[-1].exec_index = session.runs.last
            if session.tested:
                if result.status == "ok":
                    return
                session.runs.require_iteration()
            add_feedback(session, result)

    def final_code(self, session: Session) -> str | None:
        return assembled(session)

    def structure_ok(self, trace: Trace) -> bool:
        """Two or more think steps and code blocks of at most 3 lines, one execution or more."""
        model = [s for s in trace.steps if s.source == "model"]
        code = [s.text for s in model if s.kind == "code"]
        return (
            sum(s.kind == "think" for s in model) >= 2
            and len(code) >= 2
            and all(
                len([ln for ln in c.splitlines() if ln.strip()]) <= MAX_BLOCK_LINES for c in code
            )
            and trace.metrics.executions >= 1
        )
