"""What several modes share: tag turns, execution feedback, the program assembled from code
blocks, the execute-and-fix loop, and readings of a finished trace."""

from __future__ import annotations

from collections.abc import Sequence

from tracegen.episode.feedback import execution_feedback
from tracegen.episode.session import Session
from tracegen.llm.grammar import Grammar
from tracegen.modes.base import TracedMode
from tracegen.parsing.program import Program
from tracegen.parsing.segment import open_blocks
from tracegen.schema import ExecResult, Step, Trace

SYSTEM_TAG_STOPS = ("\n<result>", "\n<error>", "\n<tool_response>")
"""Stop before a result the model starts to invent on a line of its own. Without the line
break they could stop inside code (``print("<result>")``); one written mid-line is stripped."""
STEP_TAGS = ("think", "code", "verify")
CONTINUE = "Continue with your next step."
NO_CODE = "Your reply has no <code> block. Write your complete program in one <code> block."


def close_stop(tag: str) -> str:
    """The stop sequence that ends a turn after ``</tag>``. For code it needs the line break
    after the tag, so that ``"</code>"`` inside a string literal does not end the turn."""
    return "</code>\n" if tag == "code" else f"</{tag}>"


def reclose(text: str, tags: Sequence[str]) -> str:
    """Put back the closing tag a stop sequence removed: that of the innermost of ``tags``
    left open."""
    innermost = next((t for t in reversed(open_blocks(text)) if t in tags), None)
    return text if innermost is None else f"{text}</{innermost}>"


async def tag_turn(
    session: Session, close_on: Sequence[str] = (), grammar: Grammar | None = None
) -> list[Step]:
    """One turn of a tag mode: stop on the system's tags and on ``</t>`` for ``t`` in
    ``close_on`` (the closing tag the server removed is put back); its model steps.
    ``grammar`` is the turn's protocol, for constrained decoding."""
    transcript = session.transcript
    stops = [*SYSTEM_TAG_STOPS, *map(close_stop, close_on)]
    completion = await session.turns.generate(stops, grammar=grammar)
    content = transcript.strip(completion.content)
    if completion.finish_reason == "stop" and content == completion.content:
        content = reclose(content, close_on)
    index = transcript.add_assistant(completion, content)
    steps = transcript.model_steps(content, index)
    session.turns.check_cut(completion)
    return steps


def add_feedback(session: Session, result: ExecResult) -> None:
    """A tag mode's feedback: ``<result>``/``<error>`` in a user message, a system step."""
    tag, text = execution_feedback(result, session.problem, tested=session.tested)
    index = session.say("user", f"<{tag}>\n{text}\n</{tag}>")
    session.transcript.system_step(tag, text, index, session.runs.last)


def assembled(session: Session) -> str | None:
    """The program the model's code blocks add up to (see `Program`)."""
    program = Program()
    for block in session.transcript.model_code():
        program.add(block)
    return program.text or None


def turn_kinds(trace: Trace) -> list[list[str]]:
    """The kinds of the model's steps in each assistant message, in order."""
    return [
        [s.kind for s in trace.steps if s.message_index == i and s.source == "model"]
        for i, m in enumerate(trace.messages)
        if m.role == "assistant"
    ]


def interleaved(trace: Trace, min_thinks: int = 2) -> bool:
    """At least ``min_thinks`` think steps, code after a think, verify after the last code."""
    kinds = [s.kind for s in trace.steps if s.source == "model"]
    if kinds.count("think") < min_thinks or "code" not in kinds or "verify" not in kinds:
        return False
    first_code = kinds.index("code")
    last_code = len(kinds) - 1 - kinds[::-1].index("code")
    return "think" in kinds[:first_code] and "verify" in kinds[last_code:]


class FeedbackLoop(TracedMode):
    """Think + code, stop; the code runs; ``<result>``/``<error>`` goes back; until the tests
    pass or the executions run out. ``close_on`` are the tags a turn stops after."""

    close_on: tuple[str, ...] = ("code",)

    async def converse(self, session: Session) -> None:
        while True:
            steps = await tag_turn(session, self.close_on, self.grammar)
            code = [s for s in steps if s.kind == "code"]
            if not code:
                if not session.tested:
                    return
                session.say("user", NO_CODE)
                continue
            result = await session.runs.execute(code[-1].text)
            code[-1].exec_index = session.runs.last
            if session.tested:
                if result.status == "ok":
                    await self.after_success(session, result)
                    return
                session.runs.require_iteration()
            add_feedback(session, result)

    async def after_success(self, session: Session, result: ExecResult) -> None:
        """What happens once the tests pass (by default: nothing, the episode ends)."""
