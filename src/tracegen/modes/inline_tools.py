"""``inline-tools``: tool calls inside one open ``<think>``, answered in the same message.

The model writes ``<tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>``;
generation stops at ``</tool_call>`` (put back, as the server removes it); the call is
parsed (strict → escaped → extracted), its code runs as a script, and
``<tool_response>{json}</tool_response>`` is appended to the same assistant message, which
the model then continues (``--continuation``; by default the backend's best method). A call
that cannot be parsed is answered with a ``tool_response`` saying so; a second failure in a
row ends the episode.
"""

from __future__ import annotations

from tracegen.episode.feedback import tool_error_json, tool_json
from tracegen.episode.limits import unreadable_twice
from tracegen.episode.session import Session
from tracegen.modes.base import TracedMode
from tracegen.modes.common import SYSTEM_TAG_STOPS
from tracegen.modes.grammars import INLINE_CONTINUE, INLINE_FINISH, INLINE_START
from tracegen.parsing.segment import open_blocks
from tracegen.parsing.toolcall import ToolCallParseError, find_tool_call, parse_tool_call
from tracegen.schema import Step, Trace

TOOL_NAME = "python"
CLOSE = "</tool_call>"
STOPS = (*SYSTEM_TAG_STOPS, CLOSE)
FAILED = "failed"


def _ends_in_open_call(text: str) -> bool:
    last, match = None, find_tool_call(text)
    while match is not None:
        last, match = match, find_tool_call(text, match.end)
    return last is not None and not last.closed and last.end == len(text)


class InlineTools(TracedMode):
    name = "inline-tools"
    continues_message = True
    default_think = False
    """The reasoning is the ``<think>`` the model writes, so server thinking is off unless
    ``think`` is set: a thinking model's parser would move that text out of the content."""
    grammar = INLINE_START
    constrain_auto = True

    async def converse(self, session: Session) -> None:
        transcript, turns = session.transcript, session.turns
        completion = await turns.generate(STOPS, grammar=self.grammar)
        piece = self._piece(session, completion.content, completion.finish_reason)
        index = transcript.add_assistant(completion, piece)
        model_text = ""
        failed_before = False
        while True:
            open_tag = "think" if "think" in open_blocks(model_text) else None
            steps = transcript.model_steps(piece, index, open_tag)
            model_text += piece
            turns.check_cut(completion)
            calls = [s for s in steps if s.kind == "tool_call"]
            if not calls or not piece.rstrip().endswith(CLOSE):
                return
            turns.require_turn()
            failed_before = await self._answer(session, calls[-1], failed_before)
            spent = session.metrics.executions >= session.runs.max_iterations
            grammar = INLINE_FINISH if spent else INLINE_CONTINUE  # offer what the budget allows
            completion = await turns.continue_assistant(STOPS, grammar)
            piece = self._piece(session, completion.content, completion.finish_reason)
            transcript.extend_assistant(completion, piece)

    def _piece(self, session: Session, content: str, finish_reason: str | None) -> str:
        """The model's new text, with the ``</tool_call>`` the stop removed put back when
        the turn ended inside a call."""
        clean = session.transcript.strip(content)
        if finish_reason == "stop" and clean == content and _ends_in_open_call(clean):
            clean += CLOSE
        return clean

    async def _answer(self, session: Session, call: Step, failed_before: bool) -> bool:
        """Run the call and append its ``tool_response``; whether it failed to parse."""
        session.metrics.tool_calls += 1
        try:
            parsed = parse_tool_call(call.text)
            if parsed.name != TOOL_NAME or parsed.code is None:
                raise ToolCallParseError(f'the only tool is "{TOOL_NAME}" with a "code" string')
        except ToolCallParseError as e:
            session.metrics.parse_failures += 1
            call.parse_strategy = FAILED
            if failed_before:
                raise unreadable_twice(str(e)) from None
            body = tool_error_json(f"your tool call could not be parsed: {e}. Write it again.")
            session.transcript.append_system_text(
                "tool_response", f"\n<tool_response>{body}</tool_response>\n", body
            )
            return True
        session.transcript.count_strategy(parsed.strategy)
        call.parse_strategy = parsed.strategy
        result = await session.runs.execute(parsed.code, script=True)
        call.exec_index = session.runs.last
        body = tool_json(result)
        session.transcript.append_system_text(
            "tool_response", f"\n<tool_response>{body}</tool_response>\n", body, session.runs.last
        )
        return False

    def structure_ok(self, trace: Trace) -> bool:
        """A think step before and after an executed tool call, every failed call followed by
        a readable one."""
        model = [s for s in trace.steps if s.source == "model"]
        kinds = [s.kind for s in model]
        executed = [
            i for i, s in enumerate(model) if s.kind == "tool_call" and s.exec_index is not None
        ]
        around = any("think" in kinds[:i] and "think" in kinds[i:] for i in executed)
        calls = [s.parse_strategy for s in model if s.kind == "tool_call"]
        recovered = not calls or calls[-1] != FAILED
        return around and recovered
