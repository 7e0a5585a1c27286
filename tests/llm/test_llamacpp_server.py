"""Against llama.cpp's own server (``xllamacpp``, SmolLM2-135M-Instruct): exact token ids,
each continuation method proven from the server's side, and `tracegen run` end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.llamacpp import MODEL
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.openai import OpenAIBackend
from tracegen.schema import ChatMessage

pytestmark = pytest.mark.slow

PARTIAL = "<think>I add the numbers.\n<tool_call>"
SHORT_PROMPT = "You write Python. Think in <think>...</think>, then give <code>...</code>."
PROBLEM = {
    "id": "add",
    "prompt": "Write `add(a, b)` that returns a + b.",
    "entry_point": "add",
    "tests": [{"name": "small", "kind": "io", "args": [1, 2], "expected": 3}],
}


def backend(url: str) -> OpenAIBackend:
    return OpenAIBackend(f"{url}/v1", MODEL, timeout_s=600)


def messages(*turns: tuple[str, str]) -> list[ChatMessage]:
    return [ChatMessage(role=r, content=c) for r, c in turns]  # type: ignore[arg-type]


def one(*turns: tuple[str, str], tokens: int = 4) -> ChatRequest:
    options = SamplingOptions(temperature=0, seed=1, max_tokens=tokens)
    return ChatRequest(messages=messages(*turns), options=options, top_logprobs=2)


def server_ids(url: str, turns: list[dict[str, str]]) -> list[int]:
    """The ids of the prompt llama.cpp renders for ``turns``, by its own endpoints."""
    prompt = httpx.post(f"{url}/apply-template", json={"messages": turns}, timeout=60).json()
    body = {"content": prompt["prompt"], "add_special": True}
    return httpx.post(f"{url}/tokenize", json=body, timeout=60).json()["tokens"]


async def test_a_request_records_the_exact_prompt_and_every_sampled_token(
    llama_server: str,
) -> None:
    async with backend(llama_server) as b:
        assert (await b.server_info()).kind == "llamacpp"
        c = await b.chat(one(("user", "Say hello.")))
    assert c.prompt_ids == server_ids(llama_server, [{"role": "user", "content": "Say hello."}])
    assert c.completion_ids and c.logprobs and c.finish_reason in ("stop", "length")
    assert [t.id for t in c.logprobs] == c.completion_ids[: len(c.logprobs)]
    assert all(len(t.top_logprobs) == 2 for t in c.logprobs)


async def test_every_continuation_method_continues_the_open_message(llama_server: str) -> None:
    turns = (("user", "Add 1 and 2."), ("assistant", PARTIAL))
    opened = server_ids(llama_server, [{"role": r, "content": c} for r, c in turns])
    async with backend(llama_server) as b:
        raw = await b.continue_message(one(*turns), "raw")
        assert raw.prompt_ids == opened
        shown = httpx.post(f"{llama_server}/detokenize", json={"tokens": raw.prompt_ids}).json()
        assert shown["content"].endswith(f"<|im_start|>assistant\n{PARTIAL}")
        for method in ("continue", "prefill"):
            c = await b.continue_message(one(*turns), method)
            # The server evaluated exactly the open prompt: a closed turn and a new one
            # would be longer.
            assert (c.continuation, c.prompt_tokens) == (method, len(opened)), method


@pytest.mark.parametrize("mode", ["markers", "tool-feedback", "inline-tools"])
def test_tracegen_run_against_llama_server(llama_server: str, tmp_path: Path, mode: str) -> None:
    problems = tmp_path / "problems.jsonl"
    problems.write_bytes(orjson.dumps(PROBLEM) + b"\n")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / f"{mode}.txt").write_text(SHORT_PROMPT)
    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    settings = ("TRACEGEN_", "OLLAMA_", "OPENAI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(settings)}
    args = ["run", "--backend", "openai", "--host", f"{llama_server}/v1", "--model", MODEL]
    args += ["--mode", mode, "--problems", str(problems), "-o", str(out), "--rejects", str(rejects)]
    args += ["--prompts-dir", str(prompts), "--max-tokens", "12", "--max-steps", "2"]
    args += ["--temperature", "0", "--seed", "1", "--sandbox", "rlimit", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "tracegen", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = [f.read_bytes().splitlines() for f in (out, rejects) if f.exists()]
    (trace,) = [orjson.loads(line) for group in lines for line in group]
    assert trace["problem_id"] == "add" and trace["logprobs_status"] == "present"
    assert trace["token_requests"] and all(r["prompt_ids"] for r in trace["token_requests"])
    if mode == "inline-tools":
        assert trace["continuation"] in (None, "raw")
