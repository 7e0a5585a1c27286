"""tracegen's OpenEnv environment with llama.cpp's server (SmolLM2-135M-Instruct) as the
policy: OpenEnv's client runs episodes concurrently, sampling each turn from llama.cpp's
native ``/completion`` (exact ids), and gets tracegen's rewards; the trace holds the ids the
policy sampled, and tracegen's judge, run again on the final program, agrees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("openenv", reason="openenv is not installed: pip install 'tracegen[openenv]'")

from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from tests.support.asgi import add_problems, serving  # noqa: E402
from tracegen.config import RunSettings  # noqa: E402
from tracegen.grading.verdicts import Solution, verify_one  # noqa: E402
from tracegen.openenv import make_app  # noqa: E402
from tracegen.problems import load_problems  # noqa: E402
from tracegen.sandbox import Sandbox, SandboxLimits  # noqa: E402
from tracegen.schema import Trace  # noqa: E402


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    return add_problems(tmp_path / "add.jsonl", 2)


@pytest.fixture
def env_url(problems: Path) -> Iterator[str]:
    settings = RunSettings(
        mode="tool-feedback",
        problems=str(problems),
        sandbox="builtin",
        model="smollm2",
        max_iterations=2,
        max_tokens=96,
    )
    with serving(make_app(settings)) as url:
        yield url


async def _sample(policy: httpx.AsyncClient, observation: dict[str, Any]) -> dict[str, Any]:
    """One turn from llama.cpp: the chat template applied by the server, the prompt's ids
    from its tokenizer, the reply's ids as sampled."""
    rendered = await policy.post("/apply-template", json={"messages": observation["messages"]})
    prompt = rendered.json()["prompt"]
    ids = await policy.post(
        "/tokenize", json={"content": prompt, "add_special": False, "parse_special": True}
    )
    sampling = observation["sampling"]
    answer = await policy.post(
        "/completion",
        json={
            "prompt": prompt,
            "n_predict": sampling["max_tokens"],
            "temperature": sampling["temperature"],
            "seed": 7,
            "stop": observation["stop"],
            "return_tokens": True,
        },
    )
    body = answer.json()
    return {
        "content": body["content"],
        "prompt_ids": ids.json()["tokens"],
        "completion_ids": body["tokens"],
        "finish_reason": "length" if body["stop_type"] == "limit" else "stop",
    }


async def _episode(url: str, policy_url: str, problem_id: str) -> tuple[list[dict], dict]:
    sent = []
    async with (
        GenericEnvClient(base_url=url, message_timeout_s=600) as env,
        httpx.AsyncClient(base_url=policy_url, timeout=300) as policy,
    ):
        result = await env.reset(problem_id=problem_id)
        while not result.done:
            action = await _sample(policy, result.observation)
            sent.append(action)
            result = await env.step(action)
        assert isinstance(result.reward, float)
        return sent, await env.state()


def test_concurrent_episodes_with_llama_cpp_as_the_policy(
    env_url: str, llama_server: str, problems: Path
) -> None:
    async def main() -> list[tuple[list[dict], dict]]:
        return await asyncio.gather(*(_episode(env_url, llama_server, f"add{i}") for i in (0, 1)))

    results = asyncio.run(main())
    by_id = {p.id: p for p in load_problems(str(problems))}

    async def judge(trace: Trace) -> bool:
        async with Sandbox(isolation="builtin", limits=SandboxLimits.for_timeout(10)) as box:
            solution = Solution(0, by_id[trace.problem_id], trace.final_code, None, None)
            return (await verify_one(solution, box)).status == "ok"

    for sent, state in results:
        trace = Trace.model_validate(state["trace"])
        assert state["done"] and state["reward"] == trace.reward
        assert trace.error is None or trace.error.kind == "limit"
        # The ids of every turn are the ones the policy sampled, turn by turn.
        assert [r.completion_ids for r in trace.token_requests] == [
            a["completion_ids"] for a in sent
        ]
        assert [r.prompt_ids for r in trace.token_requests] == [a["prompt_ids"] for a in sent]
        if trace.final_code is not None:  # (success also needs an episode no limit ended)
            assert asyncio.run(judge(trace)) == (trace.score == 1.0)
