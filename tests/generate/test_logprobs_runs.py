"""`tracegen run --logprobs raw|processed`: each trace says which logprobs it holds and the
sampler's settings, and `convert --rl trl` says whether they are what TRL compares with."""

from __future__ import annotations

import pytest

from tests.support.fake_openai import FakeOpenAI
from tests.support.runs import inline_solver, read


@pytest.mark.parametrize(
    ("flavor", "mode", "asked", "kind"),
    [
        ("llamacpp", None, "processed", "processed"),
        ("llamacpp", None, "raw", "raw"),
        ("vllm", None, "processed", "unknown"),
        ("vllm", "processed_logprobs", "raw", "processed"),
    ],
)
def test_each_trace_records_its_logprobs_kind_and_the_sampling(
    cli, workspace, flavor, mode, asked, kind
):
    with FakeOpenAI(flavor, logprobs_mode=mode) as server:
        server.set_responder(inline_solver)
        args = workspace.args(server.api, "--mode", "inline-tools", "--limit", "2")
        args += ["--temperature", "0.7"]
        result = cli([*args, "--logprobs", asked])
    assert result.exit_code == 0, result.output
    traces = read(workspace.out)
    assert len(traces) == 2, result.output
    for trace in traces:
        assert trace["logprobs_status"] == "present"
        assert trace["logprobs_kind"] == kind
        assert trace["sampling"] == {"temperature": 0.7, "top_p": None, "top_k": None}
    out = workspace.dir / "rl.jsonl"
    result = cli(["convert", str(workspace.out), "--rl", "trl", "-o", str(out)])
    assert result.exit_code == 0, result.output
    shown = {"processed": "processed", "raw": "raw at T=0.7", "unknown": "unknown"}[kind]
    assert f"logprobs {shown} 2" in result.output
    warned = "2 episodes carry logprobs that are not the sampling distribution's" in result.output
    assert warned == (kind != "processed")


def test_an_unknown_logprobs_choice_is_refused(cli, workspace):
    result = cli([*workspace.args("http://127.0.0.1:9"), "--logprobs", "sampled"])
    assert result.exit_code == 2
    assert "logprobs" in result.output
