"""``native-tools``: a ``python`` tool in the request's ``tools``; structured ``tool_calls``
run as scripts and are answered with ``tool`` messages.

The tools reach the model through its chat template (``tools=``): the embedded model's template
is rendered by tracegen, a server renders its own. Calls a model writes as text (in its family's
format: ``--tool-parser``, by default the one its chat template or name names, see
`tracegen.parsing.tool_parsers`) are recovered: the assistant message keeps the text around
them and carries them as ``tool_calls``, so the conversation continues as with native calls.
The trace's ``tool_path`` records which way the tools went and how the calls were read. A call that
cannot be read is answered with a user message saying so (an ``error`` step, so the training
format shows it); a second failure in a row ends the episode.
"""

from __future__ import annotations

from typing import Any

import orjson

from tracegen.episode.feedback import tool_error_json, tool_json
from tracegen.episode.limits import unreadable_twice
from tracegen.episode.session import Session
from tracegen.grading.verdicts import LANGUAGE_NAMES
from tracegen.modes.base import TracedMode
from tracegen.modes.common import SYSTEM_TAG_STOPS
from tracegen.parsing.tool_parsers import choose_parser, parse_text_tool_calls
from tracegen.schema import LANGUAGES, Step, ToolCall, ToolPath, Trace

TOOL_NAME = "python"
NATIVE = "native"
FAILED = "failed"
PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run a Python script in a sandbox and return its status, stdout and stderr. "
            "Print what you want to see."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The script to run."}},
            "required": ["code"],
        },
    },
}
PROGRAM_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run a program in a sandbox (Python by default, or C++ or Java) and return its "
            "status, stdout and stderr. Print what you want to see."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program to run."},
                "language": {
                    "type": "string",
                    "enum": list(LANGUAGES),
                    "description": "The program's language (default: python).",
                },
            },
            "required": ["code"],
        },
    },
}
"""The tool of a program problem: its ``language`` argument runs C++ or Java too."""
UNREADABLE = (
    "Your tool call could not be parsed ({reason}). Call the python tool again, with the "
    "script as the JSON string argument code."
)


def text_parser(session: Session) -> str | None:
    """The family parser for calls written as text, as the run chose it (`RunSetup.choices`:
    ``--tool-parser``, or what ``auto`` found); an episode run without a setup chooses the same
    way from the settings alone."""
    settings = session.settings
    chosen = session.spec.choices.tool_parser
    return chosen or choose_parser(settings.tool_parser, None, settings.model).parser


class NativeTools(TracedMode):
    name = "native-tools"
    reads_tool_calls = True

    async def converse(self, session: Session) -> None:
        transcript, turns = session.transcript, session.turns
        parser = text_parser(session)
        tool = PROGRAM_TOOL if session.problem.is_program else PYTHON_TOOL
        failed_before = False
        while True:
            completion = await turns.generate(SYSTEM_TAG_STOPS, tools=[tool])
            path = session.tool_path = session.tool_path or ToolPath(
                tools="template" if completion.tools_in_template else "request",
                parser=parser,
            )
            said = content = transcript.strip(completion.content)
            calls, strategies = completion.tool_calls, [NATIVE] * len(completion.tool_calls)
            path.server_calls += len(calls)
            failures: list[str] = []
            if not calls:
                found = parse_text_tool_calls(content, parser, [tool])
                content, calls, failures = found.text, found.calls, found.failures
                strategies = list(found.strategies)
                path.text_calls += len(calls)
            index = transcript.add_assistant(completion, content, calls, said)
            steps = transcript.model_steps(content, index)
            turns.check_cut(completion)
            if failures and not calls:
                self._unreadable(session, steps, content, index, len(failures))
                if failed_before:
                    raise unreadable_twice(failures[0])
                failed_before = True
                notice = UNREADABLE.format(reason=failures[0])
                transcript.system_step("error", notice, session.say("user", notice))
                continue
            if not calls:
                return
            failed_before = False
            turns.require_turn()
            for call, strategy in zip(calls, strategies, strict=True):
                await self._answer(session, call, strategy, index)

    async def _answer(self, session: Session, call: ToolCall, strategy: str, index: int) -> None:
        """Run one call and answer it with a ``tool`` message."""
        session.metrics.tool_calls += 1
        fn = call.function
        text = orjson.dumps({"name": fn.name, "arguments": fn.arguments}).decode()
        step = Step(kind="tool_call", text=text, message_index=index, parse_strategy=strategy)
        session.transcript.steps.append(step)
        code = fn.arguments.get("code")
        named = fn.arguments.get("language")
        language = LANGUAGE_NAMES.get(named.strip().lower()) if isinstance(named, str) else None
        if fn.name != TOOL_NAME or not isinstance(code, str):
            session.metrics.parse_failures += 1
            step.parse_strategy = FAILED
            body = tool_error_json(f'the only tool is "{TOOL_NAME}" with a "code" string argument')
        elif named is not None and (language is None or not session.problem.is_program):
            session.metrics.parse_failures += 1
            step.parse_strategy = FAILED
            allowed = ", ".join(LANGUAGES) if session.problem.is_program else "python"
            body = tool_error_json(f'"language" must be one of {allowed}')
        else:
            session.transcript.count_strategy(strategy)
            result = await session.runs.execute(code, script=True, language=language)
            body = tool_json(result)
            step.exec_index = session.runs.last
        answer = session.say("tool", body, tool_name=TOOL_NAME)
        session.transcript.system_step("tool_response", body, answer, step.exec_index)

    def _unreadable(
        self, session: Session, steps: list[Step], content: str, index: int, count: int
    ) -> None:
        """Count calls no parser could read; mark them (or the whole reply) as failed."""
        session.metrics.tool_calls += count
        session.metrics.parse_failures += count
        marked = [s for s in steps if s.kind == "tool_call"]
        if not marked:
            marked = [Step(kind="tool_call", text=content, message_index=index)]
            session.transcript.steps.append(marked[0])
        for step in marked:
            step.parse_strategy = FAILED

    def structure_ok(self, trace: Trace) -> bool:
        """An executed tool call, every failed call followed by a readable one, a final answer
        without tool calls."""
        calls = [s for s in trace.steps if s.kind == "tool_call"]
        last = trace.messages[-1]
        return (
            any(s.exec_index is not None for s in calls)
            and calls[-1].parse_strategy != FAILED
            and last.role == "assistant"
            and not last.tool_calls
        )
