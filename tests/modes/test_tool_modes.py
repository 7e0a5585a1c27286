"""Scripted episodes of the tool modes: inline-tools (calls inside one assistant message)
and native-tools (structured ``tool_calls`` and ``tool`` messages)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support.episodes import (
    FINAL,
    RIGHT,
    TWICE,
    WRONG,
    Episodes,
    call,
    native_call,
)
from tracegen.export.builder import ConvertOptions
from tracegen.export.formats import TRAINING
from tracegen.modes.native_tools import PYTHON_TOOL

TEST_RIGHT = RIGHT + "\nprint(add(1, 2), add(-4, 1))"
TEST_WRONG = WRONG + "\nprint(add(1, 2), add(-4, 1))"
INLINE_STOPS = ["\n<result>", "\n<error>", "\n<tool_response>", "</tool_call>"]


def response(stdout: str) -> str:
    body = {"status": "ok", "exit_code": 0, "stdout": stdout, "stderr": ""}
    return f"\n<tool_response>{orjson.dumps(body).decode()}</tool_response>\n"


def kinds(trace: Any) -> list[tuple[str, str]]:
    return [(s.kind, s.source) for s in trace.steps]


# ---------------------------------------------------------------- inline-tools


async def test_inline_tools_continues_the_same_assistant_message_after_the_tool_response(
    episodes: Episodes,
) -> None:
    first = f"<think>Let me test it.\n{call(TEST_RIGHT)}\n<tool_response>made up"
    trace = await episodes.run("inline-tools", first, f"3 -3 is right.</think>{FINAL}")
    partial = f"<think>Let me test it.\n{call(TEST_RIGHT)}{response('3 -3' + chr(10))}"
    assert episodes.sent(1)[-1] == ("assistant", partial)
    assert [b["options"]["stop"] for b in episodes.bodies()] == [INLINE_STOPS] * 2
    assert all(b["think"] is False for b in episodes.bodies())
    assert [m.role for m in trace.messages] == ["system", "user", "assistant"]
    assert trace.messages[2].content == partial + f"3 -3 is right.</think>{FINAL}"
    assert kinds(trace) == [
        ("think", "model"),
        ("tool_call", "model"),
        ("tool_response", "system"),
        ("think", "model"),
        ("code", "model"),
    ]
    tool_call = trace.steps[1]
    assert (tool_call.parse_strategy, tool_call.exec_index) == ("strict", 0)
    assert trace.metrics.parse_strategies == {"strict": 1} and trace.metrics.tool_calls == 1
    assert (trace.success, trace.is_ideal, trace.continuation) == (True, True, "prefill")
    assert trace.metrics.hallucinated_results == 0
    assert len(trace.logprobs) == 1 and trace.logprobs[0].message_index == 2
    tokens = "".join(t.token for t in trace.logprobs[0].tokens)
    assert (
        tokens == f"<think>Let me test it.\n{call(TEST_RIGHT)[:-12]}3 -3 is right.</think>{FINAL}"
    )


async def test_inline_tools_raw_continuation_goes_through_generate(episodes: Episodes) -> None:
    trace = await episodes.run(
        "inline-tools",
        f"<think>Test.\n{call(TEST_RIGHT)}",
        f"Right.</think>{FINAL}",
        continuation="raw",
    )
    paths = [p for p, _, _ in episodes.fake.requests if p.startswith("/api/")]
    assert paths == ["/api/chat", "/api/chat", "/api/generate"]
    assert episodes.bodies()[1]["raw"] is True
    assert episodes.bodies()[1]["prompt"].endswith(response("3 -3\n"))
    assert trace.continuation == "raw" and trace.success and trace.is_ideal


async def test_inline_tools_model_fixes_its_code_after_seeing_the_output(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "inline-tools",
        f"<think>Try it.\n{call(TEST_WRONG)}",
        f"-1 is wrong, I subtracted.\n{call(TEST_RIGHT)}",
        f"Now 3 -3.</think>{FINAL}",
    )
    assert response("-1 -5\n") in episodes.sent(1)[-1][1]
    assert trace.metrics.executions == 2 and trace.metrics.tool_calls == 2
    assert trace.success and trace.is_ideal


@pytest.mark.parametrize(
    ("payload", "strategy"),
    [
        ('{"name": "python", "arguments": {"code": "print(1 + 2)\nprint(3)"}}', "escaped"),
        ('{"name": "python", "arguments": {"code": "print("3")"}}', "extracted"),
        ('{"name": "python", "arguments": {"code": "print(3)",}}', "escaped"),
    ],
)
async def test_inline_tools_repairs_broken_tool_call_json_and_records_how(
    episodes: Episodes, payload: str, strategy: str
) -> None:
    trace = await episodes.run(
        "inline-tools", f"<think>Run.\n<tool_call>{payload}</tool_call>", f"Ok.</think>{FINAL}"
    )
    assert trace.steps[1].parse_strategy == strategy
    assert trace.metrics.parse_strategies == {strategy: 1} and trace.metrics.parse_failures == 0
    assert '"status":"ok"' in trace.messages[2].content
    assert trace.success and trace.is_ideal


async def test_inline_tools_tells_the_model_its_call_was_unreadable_and_it_retries(
    episodes: Episodes,
) -> None:
    broken = '<tool_call>{"name": "python", "arguments": {"code": "print(1'
    trace = await episodes.run(
        "inline-tools",
        f"<think>Run.\n{broken}",
        f"Again.\n{call(TEST_RIGHT)}",
        f"Good.</think>{FINAL}",
    )
    told = episodes.sent(1)[-1][1]
    assert told.endswith("</tool_call>\n<tool_response>" + told.split("<tool_response>")[1])
    body = orjson.loads(told.split("<tool_response>")[1].split("</tool_response>")[0])
    assert body["status"] == "not-run" and "could not be parsed" in body["error"]
    assert [s.parse_strategy for s in trace.steps if s.kind == "tool_call"] == ["failed", "strict"]
    assert trace.metrics.parse_failures == 1 and trace.metrics.tool_calls == 2
    assert trace.metrics.executions == 1
    assert trace.success and trace.is_ideal and trace.reward == 1.0


async def test_inline_tools_ends_the_episode_after_two_unreadable_calls_in_a_row(
    episodes: Episodes,
) -> None:
    broken = '<tool_call>{"name": "python", "arguments": {"code": "print(1'
    trace = await episodes.run("inline-tools", f"<think>{broken}", f"Again {broken}")
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("parse", "tool_call")
    assert trace.metrics.parse_failures == 2 and not trace.success and trace.reward == -1.0


async def test_inline_tools_strips_a_tool_response_the_model_wrote_itself(
    episodes: Episodes,
) -> None:
    invented = '<think>It prints <tool_response>{"stdout": "3"}</tool_response> so done.'
    trace = await episodes.run("inline-tools", invented)
    assert trace.messages[2].content == "<think>It prints "
    assert trace.metrics.hallucinated_results == 1 and trace.metrics.tool_calls == 0
    assert not trace.success and trace.final_code is None


async def test_inline_tools_does_not_run_a_call_the_model_did_not_stop_for(
    episodes: Episodes,
) -> None:
    unclosed = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}'
    trace = await episodes.run("inline-tools", f"<think>{unclosed}\n</think>{FINAL}")
    assert trace.messages[2].content == f"<think>{unclosed}\n</think>{FINAL}"
    assert trace.metrics.tool_calls == 0 and len(episodes.bodies()) == 1
    assert trace.success and not trace.is_ideal


async def test_inline_tools_reads_an_answer_whose_tags_are_never_closed(
    episodes: Episodes,
) -> None:
    trace = await episodes.run("inline-tools", f"<think>Easy: add.\n<code>\n{RIGHT}")
    assert [s.kind for s in trace.steps] == ["think", "code"]
    assert trace.success and not trace.is_ideal


async def test_inline_tools_keeps_thinking_after_a_call_whose_code_names_the_tag(
    episodes: Episodes,
) -> None:
    code = TEST_RIGHT + '\nprint("</think>")'
    trace = await episodes.run(
        "inline-tools", f"<think>Try.\n{call(code)}", f"Right.</think>{FINAL}"
    )
    assert kinds(trace)[3] == ("think", "model") and trace.steps[3].text == "Right."
    assert trace.success and trace.is_ideal


async def test_inline_tools_runs_out_of_iterations_without_running_the_extra_call(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "inline-tools",
        f"<think>{call(TEST_WRONG)}",
        f"Again.\n{call(TEST_RIGHT)}",
        max_iterations=1,
    )
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "max_iterations")
    assert trace.metrics.executions == 1 and trace.metrics.tool_calls == 2
    assert trace.messages[2].content.endswith(call(TEST_RIGHT))
    assert trace.final_code is not None and "a - b" in trace.final_code


async def test_inline_tools_solves_a_math_problem_with_the_python_tool(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "inline-tools",
        f"<think>Bob has 9 * 2.\n{call('print(9 * 2)')}",
        "So 18.</think>\nBob has 18 apples.\n#### 18",
        problem=TWICE,
    )
    assert trace.final_answer == "18" and trace.success and trace.is_ideal
    assert trace.verdict is not None and trace.verdict.tests[0].actual == "18"
    assert "#### <number>" in episodes.sent(0)[1][1]


# ---------------------------------------------------------------- native-tools


async def test_native_tools_runs_structured_calls_and_answers_with_tool_messages(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "native-tools",
        native_call(TEST_RIGHT),
        f"It works.\n```python\n{RIGHT}\n```",
    )
    assert episodes.bodies()[0]["tools"] == [PYTHON_TOOL]
    sent = episodes.bodies()[1]["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == {"code": TEST_RIGHT}
    assert sent[3]["role"] == "tool" and sent[3]["tool_name"] == "python"
    assert orjson.loads(sent[3]["content"])["stdout"] == "3 -3\n"
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert kinds(trace) == [
        ("tool_call", "model"),
        ("tool_response", "system"),
        ("text", "model"),
        ("code", "model"),
    ]
    assert trace.steps[0].parse_strategy == "native" and trace.steps[0].exec_index == 0
    assert trace.final_code == RIGHT and trace.success and trace.is_ideal


@pytest.mark.parametrize(
    ("text", "strategy"),
    [
        (call(TEST_RIGHT), "strict"),
        (
            '<tool_call>{"name": "python", "arguments": {"code": "'
            + TEST_RIGHT
            + '"}}</tool_call>',
            "escaped",
        ),
        (
            '[TOOL_CALLS][{"name": "python", "arguments": '
            + orjson.dumps({"code": TEST_RIGHT}).decode()
            + "}]",
            "strict",
        ),
        (
            '{"name": "python", "parameters": ' + orjson.dumps({"code": TEST_RIGHT}).decode() + "}",
            "strict",
        ),
    ],
    ids=["hermes", "hermes-raw-newlines", "mistral", "llama3"],
)
async def test_native_tools_recovers_calls_written_as_text(
    episodes: Episodes, text: str, strategy: str
) -> None:
    trace = await episodes.run("native-tools", text, f"```python\n{RIGHT}\n```")
    call_message = trace.messages[2]
    assert call_message.content == "" and call_message.tool_calls is not None
    assert call_message.tool_calls[0].function.arguments == {"code": TEST_RIGHT}
    assert episodes.bodies()[1]["messages"][3]["role"] == "tool"
    assert trace.steps[0].parse_strategy == strategy and trace.metrics.executions == 1
    assert trace.success and trace.is_ideal


async def test_native_tools_keeps_the_logprobs_of_a_call_written_as_text(
    episodes: Episodes,
) -> None:
    text = f"Let me run it.\n{call(TEST_RIGHT)}"
    trace = await episodes.run("native-tools", text, f"```python\n{RIGHT}\n```")
    assert trace.messages[2].content == "Let me run it."
    assert trace.logprobs[0].message_index == 2
    assert "".join(t.token for t in trace.logprobs[0].tokens) == text


async def test_native_tools_tells_the_model_its_text_call_was_unreadable(
    episodes: Episodes,
) -> None:
    broken = '<tool_call>{"name": "python", "arguments": {"code": "print(1'
    trace = await episodes.run(
        "native-tools", broken, native_call(TEST_RIGHT), f"```python\n{RIGHT}\n```"
    )
    role, content = episodes.sent(1)[-1]
    assert role == "user" and content.startswith("Your tool call could not be parsed")
    assert trace.metrics.parse_failures == 1 and trace.metrics.tool_calls == 2
    assert trace.success and trace.is_ideal


async def test_native_tools_training_format_tells_why_an_unreadable_call_got_no_answer(
    episodes: Episodes,
) -> None:
    broken = '<tool_call>{"name": "python", "arguments": {"code": "print(1'
    trace = await episodes.run(
        "native-tools", broken, native_call(TEST_RIGHT), f"```python\n{RIGHT}\n```"
    )
    folded = TRAINING.row(trace, ConvertOptions("training"))["messages"][1]["content"]
    before, notice, after = folded.partition("<error>Your tool call could not be parsed")
    assert before.startswith(broken) and notice
    assert -1 < after.find("</error>") < after.find("<tool_call>")


async def test_native_tools_answers_a_call_to_an_unknown_tool_with_an_error(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "native-tools", native_call("ls", name="shell"), f"```python\n{RIGHT}\n```"
    )
    body = orjson.loads(episodes.bodies()[1]["messages"][3]["content"])
    assert body["status"] == "not-run" and "the only tool" in body["error"]
    assert trace.metrics.executions == 0 and trace.metrics.parse_failures == 1
    assert trace.success and not trace.is_ideal


async def test_native_tools_model_fixes_its_code_after_the_tool_output(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "native-tools",
        native_call(TEST_WRONG),
        native_call(TEST_RIGHT),
        f"```python\n{RIGHT}\n```",
    )
    outputs = [orjson.loads(m.content)["stdout"] for m in trace.messages if m.role == "tool"]
    assert outputs == ["-1 -5\n", "3 -3\n"]
    assert trace.success and trace.is_ideal and trace.metrics.turns == 3


async def test_native_tools_strips_a_result_the_model_wrote_itself(episodes: Episodes) -> None:
    trace = await episodes.run(
        "native-tools", f"```python\n{RIGHT}\n```\nOutput: <tool_response>3</tool_response>"
    )
    assert trace.messages[2].content == f"```python\n{RIGHT}\n```\nOutput: "
    assert trace.metrics.hallucinated_results == 1
    assert trace.success and not trace.is_ideal


async def test_native_tools_solves_a_math_problem_with_the_python_tool(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "native-tools", native_call("print(9 * 2)"), "Bob has 18 apples.\n#### 18", problem=TWICE
    )
    assert trace.final_answer == "18" and trace.success and trace.is_ideal


async def test_native_tools_reads_an_unclosed_code_fence(episodes: Episodes) -> None:
    trace = await episodes.run("native-tools", native_call(TEST_RIGHT), f"```python\n{RIGHT}")
    assert trace.final_code == RIGHT and trace.success


async def test_native_tools_runs_out_of_iterations(episodes: Episodes) -> None:
    trace = await episodes.run(
        "native-tools", native_call(TEST_WRONG), native_call(TEST_WRONG), max_iterations=1
    )
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "max_iterations")
    assert trace.messages[-1].role == "assistant" and trace.messages[-1].tool_calls
    assert trace.final_code == TEST_WRONG and not trace.success


def qwen3_coder_call(code: str) -> str:
    body = f"<function=python>\n<parameter=code>\n{code}\n</parameter>\n</function>"
    return f"<tool_call>\n{body}\n</tool_call>"


async def test_native_tools_reads_the_family_format_auto_picks_from_the_model_name(
    episodes: Episodes,
) -> None:
    text = "Testing it.\n" + qwen3_coder_call("print(42)")
    trace = await episodes.run(
        "native-tools", text, f"```python\n{RIGHT}\n```", model="Qwen/Qwen3-Coder-30B-A3B"
    )
    assert trace.messages[2].content == "Testing it."
    assert trace.messages[2].tool_calls is not None
    assert trace.messages[2].tool_calls[0].function.arguments == {"code": "print(42)"}
    assert trace.tool_path is not None
    assert trace.tool_path.model_dump() == {
        "tools": "request",
        "parser": "qwen3_coder",
        "server_calls": 0,
        "text_calls": 1,
    }


async def test_native_tools_with_a_named_parser_ignores_other_formats(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "native-tools", call(TEST_RIGHT), f"```python\n{RIGHT}\n```", tool_parser="mistral"
    )
    assert trace.metrics.executions == 0 and not trace.messages[2].tool_calls
    assert trace.tool_path is not None and trace.tool_path.parser == "mistral"


async def test_native_tools_records_calls_the_server_parsed(episodes: Episodes) -> None:
    trace = await episodes.run("native-tools", native_call(TEST_RIGHT), f"```python\n{RIGHT}\n```")
    assert trace.tool_path is not None
    assert (trace.tool_path.server_calls, trace.tool_path.text_calls) == (1, 0)
    assert "tool_path" in trace.to_json()
