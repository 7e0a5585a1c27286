"""Program problems in the modes: the model is shown the statement and the public tests,
execution feedback runs the public tests only, and the verdict runs every test. No byte of
a private test reaches any request sent to the server."""

from __future__ import annotations

import orjson
import pytest

from tests.support.episodes import Episodes, Reply, native_call
from tests.support.system_tools import NEEDS_GPP, NEEDS_JAVAC
from tracegen.schema import Problem, ProgramLimits, TestCase

SECRET_INPUT, SECRET_OUTPUT = "73190 52811\n", "126001\n"
PROGRAM = Problem(
    id="sum",
    prompt="Read two integers a and b; print a + b.",
    limits=ProgramLimits(time_s=2, memory_mb=128),
    tests=[
        TestCase(name="public", kind="stdio", input="2 3\n", expected="5\n"),
        TestCase(
            name="hidden", kind="stdio", input=SECRET_INPUT, expected=SECRET_OUTPUT, private=True
        ),
    ],
)
RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
HARD_CODED = "print(5)"
WRONG = "a, b = map(int, input().split())\nprint(a - b)"


def secrets_sent(episodes: Episodes) -> list[str]:
    """Which pieces of the private test appear in any request the server received."""
    sent = b"".join(orjson.dumps(body) for _, body, _ in episodes.fake.requests)
    pieces = ["73190", "52811", "126001"]
    return [p for p in pieces if p.encode() in sent]


async def test_the_prompt_shows_public_tests_only(episodes: Episodes) -> None:
    trace = await episodes.run(
        "markers", f"<think>Sum.</think>\n<code>\n{RIGHT}\n</code>", problem=PROGRAM
    )
    task = episodes.sent(0)[1][1]
    assert "2 3" in task and "Expected output" in task and "standard input" in task
    assert trace.success and trace.verdict is not None and trace.verdict.outcome == "accepted"
    assert secrets_sent(episodes) == []


async def test_feedback_runs_public_tests_and_the_verdict_all_of_them(
    episodes: Episodes,
) -> None:
    trace = await episodes.run(
        "tool-feedback",
        f"<think>Subtract?</think>\n<code>\n{WRONG}\n</code>",
        f"<think>Print the example's answer.</think>\n<code>\n{HARD_CODED}\n</code>",
        problem=PROGRAM,
    )
    feedback = episodes.sent(1)[-1][1]
    assert "input '2 3\\n': expected '5\\n', got '-1\\n'" in feedback
    # The hard-coded program passes the public test (the episode ends), not the verdict.
    assert trace.verdict is not None and not trace.success
    assert [t.outcome for t in trace.verdict.tests] == ["accepted", "wrong"]
    assert trace.score == 0.5
    assert secrets_sent(episodes) == []
    # Nor anywhere in the trace, so in nothing an export makes of it (prompt side included).
    written = orjson.dumps(trace.to_json())
    assert not any(p in written for p in (b"73190", b"52811", b"126001"))


@pytest.mark.parametrize("mode", ["native-tools", "inline-tools"])
async def test_tool_modes_never_send_private_tests(episodes: Episodes, mode: str) -> None:
    if mode == "native-tools":
        replies: list = [native_call("print(2 + 3)"), f"```python\n{RIGHT}\n```"]
    else:
        call = orjson.dumps({"name": "python", "arguments": {"code": "print(2 + 3)"}}).decode()
        replies = [
            f"<think>Try.\n<tool_call>{call}</tool_call>",
            f"Ok.</think>\n<code>\n{RIGHT}\n</code>",
        ]
    trace = await episodes.run(mode, *replies, problem=PROGRAM)
    assert trace.verdict is not None and trace.verdict.outcome == "accepted", trace.verdict
    assert secrets_sent(episodes) == []


JAVA_RIGHT = (
    "import java.util.*;\n\npublic class Main {\n"
    "    static public void main(String[] args) {\n"
    "        Scanner in = new Scanner(System.in);\n"
    "        System.out.println(in.nextLong() + in.nextLong());\n    }\n}"
)
CPP_RIGHT = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b; }"


@pytest.mark.slow
@NEEDS_JAVAC
@NEEDS_GPP
@pytest.mark.parametrize(
    ("fence", "code", "language"),
    [("java", JAVA_RIGHT, "java"), ("cpp", CPP_RIGHT, "cpp"), ("c++", CPP_RIGHT, "cpp")],
)
async def test_a_fence_names_the_programs_language(
    episodes: Episodes, fence: str, code: str, language: str
) -> None:
    """A program in a fence of its language is judged in it (here the Java program declares
    ``static public void main``, which nothing but the fence says is Java)."""
    trace = await episodes.run(
        "tool-feedback", f"<think>Sum.</think>\n```{fence}\n{code}\n```", problem=PROGRAM
    )
    assert trace.verdict is not None and trace.verdict.outcome == "accepted", trace.verdict
    (step,) = [s for s in trace.steps if s.kind == "code"]
    assert step.language == language
    assert trace.final_code == code


def _call(code: str, language: str) -> Reply:
    arguments = {"code": code, "language": language}
    return Reply(tool_calls=[{"function": {"name": "python", "arguments": arguments}}])


@pytest.mark.slow
@NEEDS_GPP
@NEEDS_JAVAC
async def test_a_tool_calls_language_argument_runs_cpp_and_java(episodes: Episodes) -> None:
    """A program problem's tool takes ``language``: the call's program is compiled and run
    once, its output (or compiler error) the answer; an unknown language is refused."""
    hello = "public class Main { public static void main(String[] a) { System.out.println(7); } }"
    trace = await episodes.run(
        "native-tools",
        _call('#include <cstdio>\nint main(){ puts("from c++"); }', "c++"),
        _call(hello, "java"),
        _call("public class Main { int x = ; }", "java"),
        _call("print(1)", "cobol"),
        f"```cpp\n{CPP_RIGHT}\n```",
        problem=PROGRAM,
    )
    offered = episodes.fake.requests[0][1]["tools"][0]["function"]["parameters"]["properties"]
    assert set(offered) == {"code", "language"}
    answers = [orjson.loads(m.content) for m in trace.messages if m.role == "tool"]
    assert [a["status"] for a in answers] == ["ok", "ok", "compile", "not-run"], answers
    assert answers[0]["stdout"] == "from c++\n" and answers[1]["stdout"] == "7\n"
    assert "error" in answers[2]["error"] and "language" in answers[3]["error"]
    assert trace.verdict is not None and trace.verdict.outcome == "accepted"
