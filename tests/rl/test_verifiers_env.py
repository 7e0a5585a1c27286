"""tracegen as a verifiers environment (``tracegen-verifiers``), run by verifiers' own
``vf-eval`` against llama.cpp's server with SmolLM2-135M-Instruct: every rollout gets
tracegen's reward, and tracegen's judge, given the program the rollout ended with, agrees
with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import orjson
import pytest

from tests.support.asgi import add_problems

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _verifiers() -> None:
    # Imported when a test runs, not when the file is collected: the fast tier skips the cost.
    pytest.importorskip(
        "verifiers.v1", reason="verifiers is not installed: pip install 'tracegen[verifiers]'"
    )


BIN = Path(sys.executable).parent
# verifiers' v1 eval command: `eval` in 0.3.1, the extra's pin (its `vf-eval` is the legacy one).
try:
    _EVAL_NAMES = [
        ep.name
        for ep in metadata.distribution("verifiers").entry_points
        if ep.group == "console_scripts" and ep.value == "verifiers.v1.cli.eval.main:main"
    ]
except metadata.PackageNotFoundError:
    _EVAL_NAMES = []
VF_EVAL = next(
    (
        found
        for name in _EVAL_NAMES
        if (found := shutil.which(name, path=str(BIN)) or shutil.which(name))
    ),
    None,
)


@pytest.mark.skipif(
    VF_EVAL is None,
    reason="verifiers' v1 eval command is not installed: pip install 'tracegen[verifiers]'",
)
@pytest.mark.skipif(
    shutil.which("uv", path=f"{BIN}:{os.environ.get('PATH', '')}") is None,
    reason="verifiers' null harness runs its chat program with uv (pip install uv)",
)
def test_vf_eval_scores_rollouts_as_tracegen_judges_them(llama_server: str, tmp_path: Path) -> None:
    problems = add_problems(tmp_path / "add.jsonl", 2)
    settings = {
        "problems": str(problems),
        "mode": "tool-feedback",
        "sandbox": "builtin",
        "max_iterations": 2,
        "max_tokens": 96,
    }
    env = {**os.environ, "POLICY_KEY": "x", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])
    run = subprocess.run(
        [VF_EVAL, "tracegen-verifiers", "--env.taskset.tracegen", orjson.dumps(settings).decode(),
         "--client.base-url", f"{llama_server}/v1", "--client.api-key-var", "POLICY_KEY",
         "-m", "smollm2", "-n", "2", "-r", "2", "--sampling.max-tokens", "96",
         "--sampling.temperature", "0.7", "--output-dir", str(tmp_path / "out"), "--no-push",
         "--env.player.harness.id", "null", "--env.player.runtime.type", "subprocess"],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [traces_file] = (tmp_path / "out").rglob("traces.jsonl")
    rows = [orjson.loads(line) for line in traces_file.read_bytes().splitlines()]
    assert len(rows) == 4
    solutions = []
    for row in rows:
        [trace] = row["traces"]
        reward = trace["rewards"]["tracegen_reward"]["score"]
        assert -1.0 <= reward <= 1.0
        episode = trace["info"]["tracegen"]
        assert episode["problem_id"] == trace["task"]["data"]["problem_id"]
        replies = [
            n["message"]["content"] for n in trace["nodes"] if n["message"]["role"] == "assistant"
        ]
        assert replies, "the rollout holds the policy's replies"
        # verifiers carries token ids (`MessageNode.token_ids`, `logprobs`) only from its
        # `train` client, which renders prompts itself and calls vLLM's
        # /inference/v1/generate (verifiers/v1/clients/train.py, 0.3.1): llama.cpp's server
        # has no such endpoint, and the `eval` client used here records none, so there are
        # no ids for tracegen to keep or lose; tracegen never writes into verifiers' nodes.
        assert all(not n.get("token_ids") for n in trace["nodes"]), trace["nodes"]
        solutions.append(
            {"problem_id": episode["problem_id"], "code": episode["final_code"] or "",
             "score": trace["metrics"]["tracegen_score"],
             "success": trace["metrics"]["tracegen_success"]}
        )  # fmt: skip
    path = tmp_path / "solutions.jsonl"
    path.write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in solutions))
    verdicts_path = tmp_path / "verdicts.jsonl"
    verify = subprocess.run(
        [sys.executable, "-m", "tracegen", "verify", str(path), "--problems", str(problems),
         "--sandbox", "builtin", "-o", str(verdicts_path)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert verify.returncode in (0, 1), verify.stderr[-2000:]
    verdicts = [orjson.loads(line) for line in verdicts_path.read_bytes().splitlines()]
    for verdict, solution in zip(verdicts, solutions, strict=True):
        assert (verdict["status"] == "ok") == (solution["score"] == 1.0), (verdict, solution)
        assert solution["success"] <= solution["score"]
        assert verdict["passed"] / verdict["total"] == solution["score"], (verdict, solution)


def test_load_environment_gives_tracegen_s_problems_as_tasks(tmp_path: Path) -> None:
    from tracegen.errors import ConfigError
    from tracegen_verifiers import load_environment

    problems = add_problems(tmp_path / "add.jsonl", 3)
    env = load_environment(problems=str(problems), mode="markers", sandbox="builtin")
    tasks = list(env.taskset.load())
    assert [t.data.problem_id for t in tasks] == ["add0", "add1", "add2"]
    assert tasks[0].data.prompt is None and "<code>" in tasks[0].data.system_prompt
    with pytest.raises(ConfigError, match="inline-tools does not run under verifiers"):
        list(load_environment(problems=str(problems), mode="inline-tools").taskset.load())
