"""tracegen as an OpenEnv environment, served by OpenEnv's own server (``create_app``) and
driven by OpenEnv's own client (``GenericEnvClient``, WebSocket sessions): episodes run
concurrently, the reward is tracegen's judge's, the state is the episode so far."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("openenv", reason="openenv is not installed: pip install 'tracegen[openenv]'")

from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from tests.support.asgi import add_problems, serving  # noqa: E402
from tracegen.config import RunSettings  # noqa: E402
from tracegen.openenv import make_app  # noqa: E402
from tracegen.schema import Trace  # noqa: E402

ADD_ANSWER = "<think>I add them.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>"
WRONG = "<code>\ndef add(a, b):\n    return a - b\n</code>"


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return add_problems(tmp_path_factory.mktemp("openenv") / "add.jsonl", 4)


@pytest.fixture(scope="module")
def markers(problems: Path) -> Iterator[str]:
    settings = RunSettings(mode="markers", problems=str(problems), sandbox="builtin", model="m")
    with serving(make_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def native(problems: Path) -> Iterator[str]:
    settings = RunSettings(
        mode="native-tools", problems=str(problems), sandbox="builtin", model="m"
    )
    with serving(make_app(settings)) as url:
        yield url


async def _episode(url: str, problem_id: str, answer: str) -> tuple[dict, dict]:
    async with GenericEnvClient(base_url=url) as env:
        first = await env.reset(problem_id=problem_id)
        assert not first.done and first.reward is None
        assert first.observation["messages"][0]["role"] == "system"
        assert "add(a, b)" in first.observation["messages"][-1]["content"]
        result = await env.step({"content": answer})
        state = await env.state()
    return {"done": result.done, "reward": result.reward, **result.observation}, state


def test_concurrent_episodes_get_tracegen_rewards(markers: str) -> None:
    async def main() -> list[tuple[dict, dict]]:
        answers = [ADD_ANSWER, WRONG, ADD_ANSWER, WRONG]
        return await asyncio.gather(
            *(_episode(markers, f"add{i}", a) for i, a in enumerate(answers))
        )

    results = asyncio.run(main())
    for i, (last, state) in enumerate(results):
        right = i % 2 == 0
        assert last["done"] is True
        assert last["reward"] == (1.0 if right else -1.0)
        assert last["metadata"]["success"] is right
        trace = Trace.model_validate(state["trace"])
        assert trace.problem_id == f"add{i}" and trace.reward == last["reward"]
        assert state["done"] and state["step_count"] == 1
        assert trace.messages[-1].content in (ADD_ANSWER, WRONG)


def test_a_reply_ends_at_the_first_stop_string_as_a_server_cuts_it(markers: str) -> None:
    async def main() -> dict:
        async with GenericEnvClient(base_url=markers) as env:
            first = await env.reset(problem_id="add0")
            stop = first.observation["stop"]
            assert "\n<result>" in stop
            await env.step({"content": ADD_ANSWER + "\n<result>ok, all passed</result>"})
            return await env.state()

    trace = Trace.model_validate(asyncio.run(main())["trace"])
    assert trace.messages[-1].content == ADD_ANSWER and trace.success


def test_a_tool_call_runs_in_the_sandbox_and_its_result_comes_back(native: str) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "python", "arguments": '{"code": "print(6 * 7)"}'},
    }
    program = "def add(a, b):\n    return a + b\n"
    final = {
        "id": "c2",
        "type": "function",
        "function": {"name": "python", "arguments": {"code": program}},
    }

    async def main() -> tuple[list[dict], dict, dict]:
        async with GenericEnvClient(base_url=native) as env:
            first = await env.reset(problem_id="add1")
            assert first.observation["tools"][0]["function"]["name"] == "python"
            after = await env.step({"tool_calls": [call]})
            assert not after.done
            await env.step({"tool_calls": [final]})
            last = await env.step({"content": "Done: add is defined above."})
            return after.observation["messages"], last, await env.state()

    messages, last, state = asyncio.run(main())
    assert messages[-1]["role"] == "tool" and "42" in messages[-1]["content"]
    assert last.done and last.reward > 0.9
    assert Trace.model_validate(state["trace"]).metrics.executions >= 2


def test_token_ids_and_logprobs_the_policy_sampled_are_the_trace_s(markers: str) -> None:
    prompt_ids, completion_ids = [1, 2, 3, 4], [10, 11, 12]
    third = len(ADD_ANSWER) // 3
    pieces = [ADD_ANSWER[:third], ADD_ANSWER[third : 2 * third], ADD_ANSWER[2 * third :]]
    logprobs = [
        {"token": piece, "logprob": value, "id": i, "top_logprobs": []}
        for piece, value, i in zip(pieces, (-0.5, -0.25, -0.125), completion_ids, strict=True)
    ]

    async def main() -> dict:
        async with GenericEnvClient(base_url=markers) as env:
            await env.reset(problem_id="add2")
            await env.step(
                {
                    "content": ADD_ANSWER,
                    "prompt_ids": prompt_ids,
                    "completion_ids": completion_ids,
                    "logprobs": logprobs,
                }
            )
            return await env.state()

    trace = Trace.model_validate(asyncio.run(main())["trace"])
    [request] = trace.token_requests
    assert request.prompt_ids == prompt_ids and request.completion_ids == completion_ids
    assert request.logprobs == [-0.5, -0.25, -0.125]
    assert trace.logprobs_status == "present"


def test_an_unknown_problem_or_a_step_before_reset_is_an_error(markers: str) -> None:
    async def main() -> None:
        async with GenericEnvClient(base_url=markers) as env:
            with pytest.raises(RuntimeError, match="no problem 'nope'"):
                await env.reset(problem_id="nope")
            with pytest.raises(RuntimeError, match="call reset first"):
                await env.step({"content": ADD_ANSWER})

    asyncio.run(main())


def test_openenvs_stateless_http_reset_answers_and_its_step_says_to_use_a_session(
    markers: str,
) -> None:
    """OpenEnv's ``POST /reset``/``/step`` make a new environment per request and call its
    ``reset_async``/``step_async`` (``http_server.py``, openenv 0.10): a reset gives the
    first turn; a step has no episode to continue, and says what to use instead."""
    first = httpx.post(f"{markers}/reset", json={"problem_id": "add0"}, timeout=60)
    assert first.status_code == 200 and not first.json()["done"]
    assert "add(a, b)" in first.json()["observation"]["messages"][-1]["content"]
    step = httpx.post(f"{markers}/step", json={"action": {"content": ADD_ANSWER}}, timeout=60)
    assert step.status_code == 409
    assert "WebSocket session" in step.json()["detail"] and "POST /step" in step.json()["detail"]


def test_openenv_yaml_passes_openenvs_own_validation() -> None:
    """``openenv validate`` (the package's manifest against OpenEnv's schema; the image
    build it would do next needs Docker, so it is skipped with ``--skip-build``)."""
    manifest = Path(make_app.__code__.co_filename).parent
    done = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", str(manifest), "--level", "static",
         "--skip-build"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Verdict: PASS" in done.stdout, done.stdout + done.stderr


def test_serving_with_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "TRACEGEN_MODE": "no-such-mode"}
    run = subprocess.run(
        [sys.executable, "-m", "tracegen.openenv", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("tracegen: error:") and "no-such-mode" in line


def test_python_m_tracegen_openenv_serves_openenv_s_routes(problems: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TRACEGEN_MODE": "markers", "TRACEGEN_PROBLEMS": str(problems)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegen.openenv", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.2)
        assert health.status_code == 200
        schema = httpx.get(f"{url}/schema", timeout=10).json()
        assert "completion_ids" in schema["action"]["properties"]
        assert "messages" in schema["observation"]["properties"]
        validate = [sys.executable, "-m", "openenv.cli", "validate", "--url", url]
        done = subprocess.run(
            [*validate, "--level", "runtime"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and "Verdict: PASS" in done.stdout, done.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=60)
