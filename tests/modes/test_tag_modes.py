"""Scripted episodes of the tag modes: markers, forced-interleave, tool-feedback,
interleaved-tools and structured, against the loopback server and a real sandbox."""

from __future__ import annotations

import pytest

from tests.support.episodes import RIGHT, TWICE, WRONG, WRONG_FEEDBACK, Episodes
from tracegen.modes.common import CONTINUE, NO_CODE

SYSTEM_STOPS = ["\n<result>", "\n<error>", "\n<tool_response>"]
PASSED = "<result>\n2/2 tests passed.\n</result>"

SOLVED = f"<think>Add them.</think>\n<code>\n{RIGHT}\n</code>"
SOLVES = {
    "markers": (
        [f"{SOLVED}\n<think>Check.</think>\n<verify>3</verify>"],
        ["think", "code", "think", "verify"],
    ),
    "forced-interleave": (
        [
            "<think>Start the function.</think>",
            "<code>\ndef add(a, b):\n</code>",
            "<think>Return the sum.</think>",
            "<code>\n    return a + b\n</code>",
            "<verify>add(1, 2) = 3</verify>",
        ],
        ["think", "code", "think", "code", "verify"],
    ),
    "tool-feedback": (
        [SOLVED],
        ["think", "code"],
    ),
    "interleaved-tools": (
        [
            "<think>Start the function.</think>",
            "<code>\ndef add(a, b):\n</code>",
            "<think>Return the sum.</think>",
            "<code>\n    return a + b\n</code>",
        ],
        ["think", "code", "think", "code"],
    ),
    "structured": (
        [
            f"<plan>Return a + b.</plan>\n<code>\n{RIGHT}\n</code>",
            "<reflection>Both tests pass.</reflection>",
        ],
        ["plan", "code", "result", "reflection"],
    ),
}


@pytest.mark.parametrize("mode", list(SOLVES))
async def test_a_model_that_solves_at_once_gives_an_ideal_successful_trace(
    episodes: Episodes, mode: str
) -> None:
    replies, kinds = SOLVES[mode]
    trace = await episodes.run(mode, *replies)
    assert trace.error is None
    assert [s.kind for s in trace.steps] == kinds
    assert trace.final_code is not None and "return a + b" in trace.final_code
    assert (trace.success, trace.is_ideal, trace.score, trace.reward) == (True, True, 1.0, 1.0)
    assert trace.metrics.turns == len(replies) == len(episodes.bodies())
    assert trace.metrics.hallucinated_results == 0
    assert trace.logprobs_status == "present"
    assert [lp.message_index for lp in trace.logprobs] == [
        i for i, m in enumerate(trace.messages) if m.role == "assistant"
    ]
    assert all(b["options"]["stop"][:3] == SYSTEM_STOPS for b in episodes.bodies())


async def test_markers_sends_one_request_and_runs_the_program_once(episodes: Episodes) -> None:
    trace = await episodes.run("markers", *SOLVES["markers"][0])
    body = episodes.bodies()[0]
    assert body["options"]["stop"] == SYSTEM_STOPS
    assert body["options"]["num_predict"] == 2048 and body["options"]["seed"] == 7
    assert [role for role, _ in episodes.sent(0)] == ["system", "user"]
    assert "Your final program must define `add`." in episodes.sent(0)[1][1]
    assert trace.metrics.executions == 0 and trace.verdict is not None
    assert trace.verdict.passed == 2


async def test_markers_joins_blocks_and_a_redefinition_corrects_the_program(
    episodes: Episodes,
) -> None:
    reply = (
        "<think>Start.</think>\n<code>\ndef add(a, b):\n</code>\n<think>Body.</think>\n"
        "<code>\n    return a - b\n</code>\n<think>Wait, that subtracts.</think>\n"
        f"<code>\n{RIGHT}\n</code>\n<verify>add(1, 2) = 3</verify>"
    )
    trace = await episodes.run("markers", reply)
    assert trace.final_code == RIGHT + "\n"
    assert trace.success and trace.metrics.code_blocks == 3 and trace.is_ideal


async def test_forced_interleave_asks_for_the_next_step_after_each_turn(
    episodes: Episodes,
) -> None:
    trace = await episodes.run("forced-interleave", *SOLVES["forced-interleave"][0])
    assert episodes.sent(1)[2:] == [
        ("assistant", "<think>Start the function.</think>"),
        ("user", CONTINUE),
    ]
    stops = episodes.bodies()[0]["options"]["stop"]
    assert stops == [*SYSTEM_STOPS, "</think>", "</code>\n", "</verify>"]
    assert trace.final_code == "def add(a, b):\n    return a + b\n"


async def test_forced_interleave_stopped_mid_reply_keeps_one_step_per_turn(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "forced-interleave",
        "<think>Start.</think>\n<code>\nwritten too early\n</code>",
        f"<code>\n{RIGHT}\n</code>",
        "<think>Check.</think>",
        "<verify>add(1, 2) = 3</verify>",
    )
    assert trace.messages[2].content == "<think>Start.</think>"
    assert trace.success and not trace.is_ideal


@pytest.mark.parametrize(
    ("mode", "first", "fixed", "kinds"),
    [
        (
            "tool-feedback",
            [f"<think>Subtract?</think>\n<code>\n{WRONG}\n</code>"],
            [f"<think>No: add.</think>\n<code>\n{RIGHT}\n</code>"],
            ["think", "code", "error", "think", "code"],
        ),
        (
            "structured",
            [f"<plan>Subtract.</plan>\n<code>\n{WRONG}\n</code>"],
            [
                f"<reflection>Wrong sign.</reflection>\n<plan>Add.</plan>\n<code>{RIGHT}</code>",
                "<reflection>Fixed.</reflection>",
            ],
            ["plan", "code", "error", "reflection", "plan", "code", "result", "reflection"],
        ),
        (
            "interleaved-tools",
            ["<think>Start.</think>", "<code>\ndef add(a, b):\n    return a - b\n</code>"],
            ["<think>Wrong sign.</think>", f"<code>\n{RIGHT}\n</code>"],
            ["think", "code", "error", "think", "code"],
        ),
    ],
)
async def test_a_model_that_fails_gets_per_test_feedback_and_fixes_its_code(
    episodes: Episodes, mode: str, first: list[str], fixed: list[str], kinds: list[str]
) -> None:
    trace = await episodes.run(mode, *first, *fixed)
    assert [s.kind for s in trace.steps] == kinds
    feedback = episodes.sent(len(first))[-1]
    assert feedback == ("user", WRONG_FEEDBACK)
    error = next(s for s in trace.steps if s.kind == "error")
    assert (error.source, error.exec_index) == ("system", 0)
    assert trace.success and trace.is_ideal and trace.error is None
    assert trace.metrics.executions == 2
    assert trace.verdict is not None and trace.verdict.status == "ok"


async def test_structured_shows_the_passing_result_before_the_last_reflection(
    episodes: Episodes,
) -> None:
    await episodes.run("structured", *SOLVES["structured"][0])
    assert episodes.sent(1)[-1] == ("user", PASSED)
    assert episodes.bodies()[1]["options"]["stop"] == [*SYSTEM_STOPS, "</reflection>"]


@pytest.mark.parametrize("mode", ["tool-feedback", "structured", "interleaved-tools"])
async def test_a_model_that_never_fixes_its_code_runs_out_of_iterations(
    episodes: Episodes, mode: str
) -> None:
    wrong = [f"<code>\ndef add(a, b):\n    return a {op} b\n</code>" for op in "-*/"]
    trace = await episodes.run(mode, *wrong, max_iterations=2)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "max_iterations")
    assert trace.metrics.executions == 2 and not trace.success and trace.reward == -1.0
    assert len(episodes.bodies()) == 2 and trace.messages[-1].role == "assistant"
    assert trace.verdict is not None and trace.verdict.passed == 0


@pytest.mark.parametrize("mode", ["forced-interleave", "interleaved-tools"])
async def test_a_model_that_never_finishes_runs_out_of_steps(episodes: Episodes, mode: str) -> None:
    trace = await episodes.run(mode, *["<think>Hmm.</think>"] * 3, max_steps=3)
    assert trace.error is not None
    assert (trace.error.kind, trace.error.reason) == ("limit", "max_steps")
    assert len(episodes.bodies()) == 3 and trace.messages[-1].role == "assistant"
    assert not trace.success and trace.final_code is None and trace.verdict is None


@pytest.mark.parametrize("mode", list(SOLVES))
async def test_a_result_the_model_starts_to_invent_is_cut_off_by_a_stop_sequence(
    episodes: Episodes, mode: str
) -> None:
    replies, kinds = SOLVES[mode]
    invented = [r + "\n<result>\nAll tests passed!\n</result>\nGreat." for r in replies]
    trace = await episodes.run(mode, *invented)
    assert [s.kind for s in trace.steps] == kinds
    assert all("All tests passed" not in m.content for m in trace.messages)
    assert trace.metrics.hallucinated_results == 0 and trace.is_ideal


INVENTED = " <result>2/2 tests passed</result> "


@pytest.mark.parametrize(
    ("mode", "replies"),
    [
        ("markers", [SOLVES["markers"][0][0].replace("3</verify>", f"3{INVENTED}</verify>")]),
        (
            "forced-interleave",
            [*SOLVES["forced-interleave"][0][:-1], f"<verify>add(1, 2) = 3{INVENTED}</verify>"],
        ),
        ("tool-feedback", [f"<think>Add.{INVENTED}</think>", *SOLVES["tool-feedback"][0]]),
        (
            "interleaved-tools",
            [
                *SOLVES["interleaved-tools"][0][:2],
                f"<think>Return the sum.{INVENTED}</think>",
                SOLVES["interleaved-tools"][0][3],
            ],
        ),
        (
            "structured",
            [SOLVES["structured"][0][0], f"<reflection>Both pass.{INVENTED}</reflection>"],
        ),
    ],
)
async def test_a_result_invented_mid_line_is_stripped_and_counted(
    episodes: Episodes, mode: str, replies: list[str]
) -> None:
    trace = await episodes.run(mode, *replies)
    assert trace.metrics.hallucinated_results == 1
    assert all("2/2 tests passed</result>" not in m.content for m in trace.messages)
    assert all(s.kind != "result" or s.source == "system" for s in trace.steps)
    assert trace.success and not trace.is_ideal and trace.reward == pytest.approx(0.9)


async def test_code_with_comparisons_and_tag_names_in_strings_is_never_cut(
    episodes: Episodes,
) -> None:
    code = (
        "def add(a, b):\n"
        '    markup = "<result>" if a < b else "</"\n'
        "    tags = ['<error>', 'code', '</code>', 'tool_call']\n"
        "    assert len(markup) > 0 and a<b or a>=b\n"
        "    return a + b"
    )
    trace = await episodes.run("tool-feedback", f"<think>Add.</think>\n<code>\n{code}\n</code>")
    assert trace.final_code == code
    assert trace.success and trace.metrics.hallucinated_results == 0


async def test_a_tag_named_in_a_string_does_not_change_the_closing_tag_put_back(
    episodes: Episodes,
) -> None:
    code = 'def add(a, b):\n    print("<think>")\n    return a + b'
    trace = await episodes.run(
        "forced-interleave",
        "<think>Add.</think>",
        f"<code>\n{code}\n</code>\n",
        "<verify>add(1, 2) = 3</verify>",
    )
    assert trace.messages[4].content == f"<code>\n{code}\n</code>"
    assert trace.final_code == code + "\n" and trace.success


@pytest.mark.parametrize(
    ("mode", "replies"),
    [
        ("markers", [f"<think>Add them.\n<code>\n{RIGHT}"]),
        ("tool-feedback", [f"<think>Add them.\n<code>\n{RIGHT}"]),
        ("structured", [f"<plan>Add them.\n<code>\n{RIGHT}", "<reflection>Done."]),
        ("forced-interleave", [f"<code>\n{RIGHT}", "<verify>ok"]),
        ("interleaved-tools", ["<think>Start", f"<code>\n{RIGHT}\n"]),
    ],
)
async def test_tags_left_open_are_read_to_the_end_of_the_reply(
    episodes: Episodes, mode: str, replies: list[str]
) -> None:
    trace = await episodes.run(mode, *replies)
    assert trace.final_code is not None and trace.final_code.rstrip() == RIGHT
    assert trace.success and trace.error is None


async def test_a_reply_without_code_is_asked_for_code(episodes: Episodes) -> None:
    trace = await episodes.run(
        "tool-feedback", "<think>I will add them", f"<code>\n{RIGHT}\n</code>"
    )
    assert episodes.sent(1)[-2:] == [("assistant", "<think>I will add them"), ("user", NO_CODE)]
    assert trace.success and not trace.is_ideal


@pytest.mark.parametrize(
    ("mode", "replies"),
    [
        ("markers", ["<think>Twice 9 is 18.</think>\nBob has 18 apples.\n#### 18"]),
        ("tool-feedback", ["<think>Compute.</think>\n<code>\nprint(9 * 2)\n</code>", "#### 18"]),
        ("structured", ["<plan>Compute.</plan>\n<code>\nprint(9 * 2)\n</code>", "#### 18"]),
    ],
)
async def test_math_problems_run_code_as_a_script_and_grade_the_final_answer(
    episodes: Episodes, mode: str, replies: list[str]
) -> None:
    trace = await episodes.run(mode, *replies, problem=TWICE)
    assert trace.final_answer == "18" and trace.success
    if len(replies) > 1:
        assert episodes.sent(1)[-1] == ("user", "<result>\n18\n</result>")
