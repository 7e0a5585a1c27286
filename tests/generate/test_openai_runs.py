"""`tracegen run`, `doctor` and `stats` against OpenAI-compatible servers (the loopback stand-in):
every flavour found by ``--backend auto``, inline-tools continuing its message, token ids
recorded, and the refusals a run gives at its start."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import orjson
import pytest

from tests.support.backends import GENERATION_PATHS
from tests.support.fake_model import END_OF_TURN, Reply
from tests.support.fake_ollama import FakeOllama
from tests.support.fake_openai import FakeOpenAI, grammar_sent
from tests.support.runs import IDEAL, inline_solver, read, solver
from tracegen.modes.grammars import MARKERS


@pytest.mark.parametrize("flavor", ["vllm", "sglang", "llamacpp"])
def test_inline_tools_continues_one_message_on_each_server(cli, workspace, flavor):
    with FakeOpenAI(flavor) as server:
        server.set_responder(inline_solver)
        args = workspace.args(server.api, "--mode", "inline-tools", "--limit", "3")
        result = cli([*args, "--backend", "openai"])
        prompts, host = list(server.prompts), server.api
    assert result.exit_code == 0, result.output
    traces = read(workspace.out)
    assert len(traces) == 3 and all(t["success"] and t["is_ideal"] for t in traces)
    method = {"vllm": "continue", "sglang": "continue", "llamacpp": "raw"}[flavor]
    for t in traces:
        (answer,) = [m["content"] for m in t["messages"] if m["role"] == "assistant"]
        assert answer.count("<tool_response>") == 1 and t["continuation"] == method
        assert t["logprobs_status"] == "present" and t["hosts"] == [host]
    answers = [p[p.rindex("<|im_start|>assistant") :] for p in prompts]
    continued = [a for a in answers if "<tool_response>" in a]
    assert len(continued) == 3 and not any(END_OF_TURN in a for a in continued)


@pytest.mark.parametrize("flavor", ["vllm", "llamacpp"])
def test_token_ids_of_every_request_are_recorded_and_counted_by_stats(cli, workspace, flavor):
    with FakeOpenAI(flavor) as server:
        server.set_responder(inline_solver)
        args = workspace.args(server.api, "--mode", "inline-tools", "--limit", "2")
        assert cli(args).exit_code == 0
        vocab = server.vocab
        for trace in read(workspace.out):
            first, second = (vocab.decode(r["prompt_ids"]) for r in trace["token_requests"])
            (answer,) = [m["content"] for m in trace["messages"] if m["role"] == "assistant"]
            assert second.startswith(first) and answer.startswith(second[len(first) :])
            assert all(t["id"] is not None for turn in trace["logprobs"] for t in turn["tokens"])
    result = cli(["stats", str(workspace.out), "--json"])
    coverage = orjson.loads(result.output)["logprobs"]
    assert (coverage["model_requests"], coverage["requests_with_token_ids"]) == (4, 4)
    assert coverage["token_id_coverage"] == 1.0


def test_an_episode_goes_on_from_the_ids_llamacpp_sampled_and_exports_as_one_sequence(
    cli, workspace
):
    """The model samples its text one character per token, which /tokenize never gives: each
    next prompt still starts with the previous prompt and every sampled id."""
    with FakeOpenAI("llamacpp") as server:
        server.set_responder(
            lambda path, body: replace(inline_solver(path, body), by_character=True)
        )
        assert (
            cli(workspace.args(server.api, "--mode", "inline-tools", "--limit", "2")).exit_code == 0
        )
    for trace in read(workspace.out):
        first, then = trace["token_requests"]
        sent = first["prompt_ids"] + first["completion_ids"]
        assert then["prompt_ids"][: len(sent)] == sent
    out = workspace.dir / "rl.jsonl"
    result = cli(["convert", str(workspace.out), "--rl", "trl", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 as one sequence, 0 turn by turn" in result.output


def test_auto_finds_each_server_and_a_host_given_without_v1_works(cli, workspace):
    for flavor in ("vllm", "lmstudio"):
        with FakeOpenAI(flavor) as server:
            server.set_responder(solver)
            result = cli([*workspace.args(server.url, "--limit", "2"), "--overwrite"])
        assert result.exit_code == 0, result.output
        assert len(read(workspace.out)) == 2


def test_a_server_that_cannot_continue_is_refused_at_the_start(cli, workspace):
    with FakeOpenAI("lmstudio") as server:
        result = cli(workspace.args(server.api, "--mode", "inline-tools"))
        generated = [p for p in server.paths() if p.endswith("/completions")]
    assert result.exit_code == 2
    assert "does not work with LM Studio" in result.output and "another --mode" in result.output
    assert generated == [] and read(workspace.out) == []


def test_a_continuation_method_the_server_lacks_names_those_it_has(cli, workspace):
    with FakeOpenAI("vllm") as server:
        args = workspace.args(server.api, "--mode", "inline-tools", "--continuation", "prefill")
        result = cli(args)
    assert result.exit_code == 2
    refusal = r"--continuation prefill does not work with vLLM at \S+ \(choices that do: "
    assert re.search(refusal + r"auto, continue\)", result.output)


def test_hosts_of_different_kinds_are_one_clear_error(cli, workspace):
    with FakeOllama() as ollama, FakeOpenAI("vllm") as vllm:
        result = cli(workspace.args(ollama, "--host", vllm.api))
        assert result.exit_code == 2
        assert "one run talks to one kind of server" in result.output
        assert f"{ollama.url} is Ollama (ollama)" in result.output
        assert f"{vllm.api} is vLLM (openai)" in result.output


def test_the_api_key_is_sent_as_a_bearer_token_and_a_wrong_one_is_named(
    cli, workspace, monkeypatch
):
    with FakeOpenAI("vllm", api_key="sk-right") as server:
        server.set_responder(solver)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
        assert cli(workspace.args(server.api, "--limit", "1")).exit_code == 0
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        result = cli([*workspace.args(server.api, "--limit", "2")])
    assert result.exit_code == 1
    assert "OPENAI_API_KEY was rejected" in result.output and "sk-wrong" not in result.output


@pytest.mark.parametrize("flavor", ["vllm", "llamacpp", "lmstudio"])
def test_doctor_reports_the_server_and_what_it_gives(cli, flavor, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with FakeOpenAI(flavor) as server:
        result = cli(["doctor", "--host", server.api, "--model", "test-model"])
        host = server.api
    out = result.output
    name = {"vllm": "vLLM 0.11.2", "llamacpp": "llama.cpp b6900-abc1234", "lmstudio": "LM Studio"}
    assert f"{host} reachable, {name[flavor]}" in out
    assert "test-model present" in out and "returned (1 token(s))" in out
    if flavor == "lmstudio":
        assert "not offered: traces have logprobs but no token_requests" in out
        assert "does not work with LM Studio" in out
    else:
        assert "prompt," in out and "sampled" in out and " works (" in out
    assert result.exit_code == (1 if flavor == "lmstudio" else 0), out


def adds(path: str, body: dict[str, Any]) -> Reply:
    """The right markers answer to every problem (whether messages or a rendered prompt)."""
    return Reply(content=IDEAL.format(ret="a + b"))


def grammars_sent(server: FakeOpenAI) -> list[str | None]:
    return [grammar_sent(body) for path, body, _ in server.requests if path in GENERATION_PATHS]


@pytest.mark.parametrize("flavor", ["vllm", "sglang", "llamacpp"])
def test_constrain_on_sends_the_modes_grammar_where_each_server_reads_it(cli, workspace, flavor):
    with FakeOpenAI(flavor) as server:
        server.set_responder(adds)
        result = cli([*workspace.args(server.api, "--limit", "2"), "--constrain", "on"])
        sent = grammars_sent(server)
    assert result.exit_code == 0, result.output
    assert sent == [MARKERS.gbnf, MARKERS.gbnf]
    assert [t["grammars"] for t in read(workspace.out)] == [{"markers": MARKERS.sha256}] * 2


def test_constrain_auto_leaves_a_server_unconstrained(cli, workspace):
    with FakeOpenAI("llamacpp") as server:
        server.set_responder(adds)
        assert cli(workspace.args(server.api, "--limit", "1")).exit_code == 0
        sent = grammars_sent(server)
    assert sent == [None] and read(workspace.out)[0]["grammars"] == {}


def test_constrain_on_is_refused_at_the_start_where_the_server_takes_no_grammar(cli, workspace):
    with FakeOpenAI("lmstudio") as server:
        result = cli([*workspace.args(server.api), "--constrain", "on"])
        sent = grammars_sent(server)
    assert result.exit_code == 2
    refusal = r"--constrain on needs a backend that takes a grammar .*LM Studio at \S+ does not"
    assert re.search(refusal, result.output), result.output
    assert sent == [] and read(workspace.out) == []
