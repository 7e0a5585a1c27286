"""``tool-feedback``: think + code, stop; the code runs; ``<result>``/``<error>`` goes back."""

from __future__ import annotations

from tracegen.episode.session import Session, TracedMode, turn_kinds
from tracegen.schema import ExecResult, Trace

NO_CODE = "Your reply has no <code> block. Write your complete program in one <code> block."


class ToolFeedback(TracedMode):
    name = "tool-feedback"

    async def converse(self, session: Session) -> None:
        while True:
            code = [s for s in await session.tag_turn(("code",)) if s.kind == "code"]
            if not code:
                if not session.tested:
                    return
                session.add_message("user", NO_CODE)
                continue
            result = await session.execute(code[-1].text)
            code[-1].exec_index = session.last_exec
            if session.tested:
                if result.status == "ok":
                    await self.after_success(session, result)
                    return
                session.require_iteration()
            session.add_feedback(result)

    async def after_success(self, session: Session, result: ExecResult) -> None:
        """What happens once the tests pass (here: nothing, the episode ends)."""

    def structure_ok(self, trace: Trace) -> bool:
        """Every turn thinks, then writes code (a math problem's last turn: the answer)."""
        turns = turn_kinds(trace)
        if trace.final_answer is not None:
            turns = turns[:-1]
        return all(
            "think" in k and "code" in k and k.index("think") < k.index("code") for k in turns
        )
