"""`tracegen run` with the real embedded model, end to end in a child process: every episode
recorded with its logprobs and exact token ids, the ids consistent with the text, resume after
an interrupted run. Small budgets keep it to seconds per run."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import clean_env, spawn, wait_for_records
from tests.support.scenarios import read_jsonl
from tracegen.generate.first_run import FIRST_RUN, STARTER_PROBLEMS
from tracegen.generate.runfiles import state_path
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import DEFAULT_MODEL
from tracegen.modes.common import SYSTEM_TAG_STOPS
from tracegen.problems import load_problems

pytestmark = pytest.mark.slow

STOPS = [*SYSTEM_TAG_STOPS, "</code>\n", "</tool_call>", "<|im_end|>"]
BUDGET = ["--max-tokens", "40", "--max-iterations", "1", "--max-steps", "3", "--concurrency", "2"]


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracegen", "run", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def model_text(ids_text: str) -> str:
    """What of a completion's detokenized ids lands in the message: up to its first stop."""
    cut = min((i for i in (ids_text.find(s) for s in STOPS) if i >= 0), default=len(ids_text))
    return ids_text[:cut]


async def check_tokens(trace: dict[str, Any], model: LocalBackend) -> None:
    assert trace["logprobs_status"] == "present"
    assert trace["token_requests"], trace["id"]
    for request in trace["token_requests"]:
        assert request["prompt_ids"] and request["completion_ids"]
        assert len(request["logprobs"]) == len(request["completion_ids"])
        text = await model.detokenize(request["completion_ids"])
        message = trace["messages"][request["message_index"]]
        assert message["role"] == "assistant"
        assert model_text(text) in message["content"]
    tokens = [t for turn in trace["logprobs"] for t in turn["tokens"]]
    ids = [i for request in trace["token_requests"] for i in request["completion_ids"]]
    assert [t["id"] for t in tokens] == ids


@pytest.mark.parametrize("mode", ["markers", "tool-feedback", "inline-tools"])
async def test_every_episode_is_recorded_with_exact_tokens(
    mode: str, tmp_path: Path, local_model: LocalBackend
) -> None:
    out, rejects = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    backend = [] if mode == "inline-tools" else ["--backend", "local"]  # auto finds no server
    result = run(
        [
            "--mode",
            mode,
            "--problems",
            "builtin",
            "--limit",
            "2",
            *BUDGET,
            *backend,
            "-o",
            str(out),
            "--rejects",
            str(rejects),
        ]
    )
    assert result.returncode == 0, result.stderr
    if not backend:
        assert "running smollm2-135m in process" in result.stdout
    traces = read_jsonl(out) + read_jsonl(rejects)
    assert sorted(t["problem_id"] for t in traces) == ["is_palindrome", "two_sum"]
    for trace in traces:
        assert trace["model"] == "smollm2-135m" and trace["hosts"] == ["local"]
        assert trace["grammars"], "auto constrains this mode on the embedded model"
        await check_tokens(trace, local_model)


def test_an_interrupted_run_resumes_without_duplicates(tmp_path: Path, children: list) -> None:
    out, rejects = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    args = ["run", "--backend", "local", "--mode", "markers", "--limit", "3", *BUDGET]
    args += ["--concurrency", "1", "--num-samples", "1", "-o", str(out), "--rejects", str(rejects)]
    first = spawn(args)
    children.append(first)
    wait_for_records(out.with_name(out.name + ".state"), 2, first)  # header and one episode
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) in (0, 130)
    again = run(args[1:])
    assert again.returncode == 0, again.stderr
    keys = [(t["problem_id"], t["sample"]) for t in read_jsonl(out) + read_jsonl(rejects)]
    assert len(keys) == len(set(keys)) == 3


def test_doctor_reports_the_embedded_model() -> None:
    env = {**clean_env(), "COLUMNS": "250"}
    del env["TRACEGEN_THREADS"]  # the default, and why
    result = subprocess.run(
        [sys.executable, "-m", "tracegen", "doctor", "--backend", "local"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    for shown in ("SmolLM2-135M-Instruct", "trained for 8192 tokens", "template from the file"):
        assert shown in out, out
    assert "with token ids" in out and "loaded in" in out, out
    assert re.search(r"\d+ threads?: one per idle core, [\d.]+ of \d+ cores? busy", out), out


def test_a_first_run_takes_the_starter_problems_and_its_preset(tmp_path: Path) -> None:
    out, rejects = tmp_path / "t.jsonl", tmp_path / "rejects.jsonl"
    result = run(["--backend", "local", "--limit", "1", "-o", str(out), "--rejects", str(rejects)])
    assert result.returncode == 0, result.stderr
    said = next(ln for ln in result.stdout.splitlines() if ln.startswith("no problems named"))
    assert said.startswith("no problems named: the starter set"), said
    for key, value in FIRST_RUN.items():
        assert f"--{key.replace('_', '-')} {value}" in said, said
    traces = read_jsonl(out) + read_jsonl(rejects)
    starter = {p.id for p in load_problems("starter")}
    assert len(traces) == FIRST_RUN["num_samples"]
    assert {t["problem_id"] for t in traces} <= starter
    assert {t["mode"] for t in traces} == {FIRST_RUN["mode"]}
    decided = read_jsonl(state_path(out))[0]["run"]
    assert (decided["backend"], decided["model"]) == ("local", DEFAULT_MODEL)
    assert (decided["problems"], decided["first_run"]) == (STARTER_PROBLEMS, said)
    opening = next(ln for ln in result.stdout.splitlines() if "tracegen run:" in ln)
    assert f"backend local · model {DEFAULT_MODEL} · problems {STARTER_PROBLEMS} · first run" in (
        opening
    ), opening


def test_a_first_run_given_a_generation_setting_takes_no_preset(tmp_path: Path) -> None:
    """`tracegen run --mode inline-tools --limit 3 --max-tokens 128` runs 3 episodes (one
    sample of three starter problems), not the preset's 12."""
    out, rejects = tmp_path / "t.jsonl", tmp_path / "rejects.jsonl"
    given = ["--mode", "inline-tools", "--limit", "3", "--max-tokens", "128"]
    result = run(["--backend", "local", *given, "-o", str(out), "--rejects", str(rejects)])
    assert result.returncode == 0, result.stderr
    said = next(ln for ln in result.stdout.splitlines() if ln.startswith("no problems named"))
    assert "no first-run preset" in said and "--num-samples 4" not in said, said
    traces = read_jsonl(out) + read_jsonl(rejects)
    assert len(traces) == 3
    assert {t["mode"] for t in traces} == {"inline-tools"}
    assert {t["problem_id"] for t in traces} <= {p.id for p in load_problems("starter")}
