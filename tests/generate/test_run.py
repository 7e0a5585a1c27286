"""`tracegen run` end to end against the loopback server: concurrency, hosts, filters, errors."""

from __future__ import annotations

import re
import socket
import time
from collections import Counter
from functools import partial

import orjson
import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tests.support.runs import (
    expected_ideal,
    expected_success,
    keys,
    problem_number,
    read,
    solver,
    spawn,
    tracegen,
)
from tracegen import errors
from tracegen.config import RunSettings
from tracegen.generate.runfiles import state_path
from tracegen.llm import factory
from tracegen.llm.pool import HostPool
from tracegen.modes.markers import Markers


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_every_episode_is_scored_and_written(cli, model, workspace):
    result = cli(workspace.args(model, "--num-samples", "2"))
    assert result.exit_code == 0, result.output
    traces = read(workspace.out)
    assert sorted(keys(workspace.out)) == sorted((f"p{i}", s) for i in range(12) for s in (0, 1))
    for t in traces:
        n = int(t["problem_id"][1:])
        assert t["success"] is expected_success(n)
        assert t["is_ideal"] is expected_ideal(n)
        assert t["hosts"] == [model.url]
    assert len({t["id"] for t in traces}) == 24


def test_concurrency_is_reached_on_every_host(cli, workspace):
    with FakeOllama(latency_s=0.3) as a, FakeOllama(latency_s=0.3) as b:
        a.set_responder(solver)
        b.set_responder(solver)
        args = workspace.args(a, "--host", b.url, "--concurrency", "3")
        result = cli(args)
        assert result.exit_code == 0, result.output
        assert a.max_in_flight == 3
        assert b.max_in_flight == 3
        served = [t["hosts"][0] for t in read(workspace.out)]
        assert served.count(a.url) >= 3
        assert served.count(b.url) >= 3


def test_an_unreachable_host_is_benched_and_the_run_goes_on(cli, model, workspace):
    result = cli(workspace.args(model, "--host", dead_url()))
    assert result.exit_code == 0, result.output
    assert "does not answer" in result.stderr
    assert len(read(workspace.out)) == 12
    assert {t["hosts"][0] for t in read(workspace.out)} == {model.url}


def test_only_success_sends_failures_to_the_rejects_file(cli, model, workspace):
    result = cli(workspace.args(model, "--only-success", "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    assert all(t["success"] for t in read(workspace.out))
    assert sorted(keys(workspace.out, workspace.rejects)) == sorted((f"p{i}", 0) for i in range(12))
    assert {t["problem_id"] for t in read(workspace.rejects)} == {"p0", "p3", "p6", "p9"}


def test_only_ideal_keeps_ideal_traces_only(cli, model, workspace):
    result = cli(workspace.args(model, "--only-ideal", "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    kept = {t["problem_id"] for t in read(workspace.out)}
    assert kept == {f"p{i}" for i in range(12) if expected_ideal(i)}
    assert len(read(workspace.rejects)) == 12 - len(kept)


def cut_short_on(numbers):
    """`solver`, except that the problems numbered in ``numbers`` run out of tokens."""

    def reply(path, body):
        if problem_number(body) in numbers:
            return Reply(content="<think>" + "and so on " * 50, done_reason="length")
        return solver(path, body)

    return reply


def test_limit_ended_episodes_are_in_the_output_without_a_filter(cli, model, workspace):
    model.set_responder(cut_short_on({4}))
    result = cli(workspace.args(model, "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    kept = {t["problem_id"]: t for t in read(workspace.out)}
    assert set(kept) == {f"p{i}" for i in range(12)}
    assert kept["p4"]["error"]["kind"] == "limit"
    assert kept["p4"]["success"] is False
    assert read(workspace.rejects) == []


def test_a_filter_moves_limit_ended_episodes_to_the_rejects(cli, model, workspace):
    model.set_responder(cut_short_on({4}))
    args = workspace.args(model, "--only-success", "--rejects", str(workspace.rejects))
    assert cli(args).exit_code == 0
    assert "p4" not in {t["problem_id"] for t in read(workspace.out)}
    assert "p4" in {t["problem_id"] for t in read(workspace.rejects)}


def test_stats_success_rate_and_pass_at_1_equal_the_run_summary(cli, model, workspace):
    model.set_responder(cut_short_on({1, 2, 4, 7}))
    result = cli(workspace.args(model, "--num-samples", "2"))
    assert result.exit_code == 0, result.output
    (summary,) = re.findall(r"success rate\s+│?\s*(\d+)%", result.stdout)
    stats = cli(["stats", "--json", str(workspace.out)])
    assert stats.exit_code == 0, stats.output
    report = orjson.loads(stats.stdout)
    # 12 problems × 2 samples; successes: not a multiple of 3, not cut short
    success = sum(expected_success(n) for n in range(12) if n not in {1, 2, 4, 7}) * 2
    assert report["traces"] == 24
    assert report["success_rate"] == pytest.approx(success / 24)
    assert report["pass_at_k"]["1"] == pytest.approx(success / 24)
    assert int(summary) == round(100 * success / 24)


def test_an_unexpected_exception_becomes_a_failed_record(cli, model, workspace, monkeypatch):
    original = Markers.final_code

    def broken(self, session):
        if session.problem.id == "p7":
            raise RuntimeError("something odd")
        return original(self, session)

    monkeypatch.setattr(Markers, "final_code", broken)
    result = cli(workspace.args(model, "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    (failed,) = read(workspace.rejects)
    assert failed["problem_id"] == "p7"
    assert failed["error"]["kind"] == "internal"
    assert len(read(workspace.out)) == 11


def test_a_server_down_for_too_long_stops_the_run_with_a_resume_hint(
    cli, model, workspace, monkeypatch
):
    monkeypatch.setenv("TRACEGEN_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("TRACEGEN_MAX_OUTAGE_S", "0.3")
    monkeypatch.setattr(factory, "HostPool", partial(HostPool, bench_s=0.05))
    model.fail_randomly(1.0, ["status"], seed=1)
    result = cli(workspace.args(model, "--rejects", str(workspace.rejects)))
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no host has answered for 0.3s" in line and "run the same command to resume" in line
    assert read(workspace.out) == []
    assert len(read(workspace.rejects)) < 12


def test_a_server_dripping_its_answer_stops_the_run_within_the_outage_flag(
    cli, model, workspace, monkeypatch
):
    """Under the default request timeout (600 s), a server sending a byte every 2 s is never
    idle and never done: the request is given up at the outage window (`--max-outage-s`)."""
    monkeypatch.delenv("TRACEGEN_REQUEST_TIMEOUT_S", raising=False)
    monkeypatch.setenv("TRACEGEN_MAX_ATTEMPTS", "1")
    monkeypatch.setattr(factory, "HostPool", partial(HostPool, bench_s=0.05))
    model.fail_randomly(1.0, [Fault("wire", message="slow-drip")], seed=1)
    started = time.monotonic()
    result = cli(workspace.args(model, "--max-outage-s", "0.5"))
    took = time.monotonic() - started
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no host has answered for 0.5s" in line and "did not answer within 0.5s" in line
    assert took < 15, took
    assert read(workspace.out) == []


def test_the_outage_window_caps_a_model_request():
    settings = RunSettings(model="m", max_outage_s=60)
    assert factory.request_timeout_s(settings) == 60
    assert factory.request_timeout_s(settings.model_copy(update={"max_outage_s": 3600})) == 600


def test_unreachable_server_is_one_line_and_exit_1(cli, workspace):
    result = cli(workspace.args(dead_url()))
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tracegen: error: ")
    assert "ollama serve" in line


def test_a_run_no_server_answered_leaves_no_files(cli, workspace):
    result = cli(workspace.args(dead_url()))
    assert result.exit_code == 1
    made = {workspace.out, workspace.rejects, workspace.out.with_name("traces.jsonl.state")}
    assert not made & set(workspace.dir.iterdir())


def test_overwrite_leaves_every_file_as_it_was_when_no_server_answers(cli, model, workspace):
    """``--overwrite`` starts the files afresh only once a server has answered: a run against
    a dead one exits 1 with the traces of the last run intact."""
    first = cli(workspace.args(model, "--rejects", str(workspace.rejects), "--only-success"))
    assert first.exit_code == 0, first.output
    state = workspace.out.with_name("traces.jsonl.state")
    files = (workspace.out, workspace.rejects, state)
    before = {p: p.read_bytes() for p in files}
    assert all(before.values())
    args = workspace.args(dead_url(), "--rejects", str(workspace.rejects), "--only-success")
    proc = spawn([*args, "--temperature", "0.1", "--overwrite"])
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert {p: p.read_bytes() for p in files} == before


def test_unknown_model_stops_the_run_with_one_line(cli, model, workspace):
    args = workspace.args(model)
    args[args.index("test-model")] = "no-such-model"
    result = cli(args)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no-such-model" in line and "not found" in line
    assert read(workspace.out) == []


def test_require_logprobs_stops_at_the_first_trace_without_them(cli, model, workspace):
    model.set_responder(
        lambda path, body: Reply(content=solver(path, body).content, logprobs=False)
    )
    result = cli(workspace.args(model, "--require-logprobs"))
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no logprobs" in line
    assert read(workspace.out) == []


def test_plain_progress_lines_and_a_summary_when_not_a_terminal(cli, model, workspace):
    result = cli(workspace.args(model))
    assert result.exit_code == 0
    assert "12/12 done" in result.stdout
    assert "accepted 12" in result.stdout
    assert "success rate" in result.stdout


def test_quiet_prints_nothing(cli, model, workspace):
    result = cli(workspace.args(model, "--quiet"))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert len(read(workspace.out)) == 12


def test_an_output_that_cannot_be_written_is_one_line_exit_2(cli, model, workspace):
    blocker = workspace.dir / "file"
    blocker.write_text("")
    args = workspace.args(model)
    args[args.index(str(workspace.out))] = str(blocker / "traces.jsonl")
    result = cli(args)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tracegen: error: ") and "traces.jsonl" in line


def test_exec_timeout_bounds_every_execution(cli, fake_ollama, workspace):
    slow = "import time\ntime.sleep(3)\n"
    fake_ollama.set_responder(lambda path, body: Reply(content=f"<code>\n{slow}</code>"))
    result = cli(workspace.args(fake_ollama, "--limit", "1", "--exec-timeout", "0.5"))
    assert result.exit_code == 0, result.output
    [trace] = read(workspace.out)
    assert trace["verdict"]["status"] == "timeout"
    assert trace["verdict"]["duration_s"] < 3


@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_an_exec_timeout_out_of_range_is_one_line_exit_2(cli, workspace, value):
    result = cli(workspace.args(dead_url(), "--exec-timeout", value))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tracegen: error: exec-timeout")
    assert not workspace.out.exists()


def test_episodes_caught_in_a_short_outage_run_again_instead_of_failing(
    cli, model, workspace, monkeypatch
):
    monkeypatch.setenv("TRACEGEN_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("TRACEGEN_MAX_OUTAGE_S", "30")
    monkeypatch.setattr(factory, "HostPool", partial(HostPool, bench_s=0.05))
    model.fail_next(*[Fault("status", 503)] * 10)
    result = cli(workspace.args(model, "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    assert len(read(workspace.out)) == 12
    assert read(workspace.rejects) == []
    assert re.search(r"episodes run again\s+│ 10\s", result.stdout)


def test_an_episode_that_keeps_failing_is_recorded_after_its_runs_again(
    cli, model, workspace, monkeypatch
):
    monkeypatch.setenv("TRACEGEN_MAX_ATTEMPTS", "1")
    monkeypatch.setattr(factory, "HostPool", partial(HostPool, bench_s=0.05))
    model.set_responder(
        lambda path, body: None if problem_number(body) == 7 else solver(path, body)
    )
    result = cli(workspace.args(model, "--rejects", str(workspace.rejects)))
    assert result.exit_code == 0, result.output
    [failed] = read(workspace.rejects)
    assert (failed["problem_id"], failed["error"]["reason"]) == ("p7", "server_error")
    asked = [body for path, body, _ in model.requests if path == "/api/chat"]
    assert sum(problem_number(body) == 7 for body in asked) == 1 + errors.EPISODE_TRIES
    assert len(read(workspace.out)) == 11


def test_every_request_carries_its_episodes_trace_id_as_session_header(cli, workspace):
    with FakeOllama() as server:
        server.set_responder(solver)
        args = ["--limit", "4", "--mode", "tool-feedback", "--rejects", str(workspace.rejects)]
        result = cli(workspace.args(server, *args))
        assert result.exit_code == 0, result.output
        sessions = Counter(h.get("x-session-id") for p, _, h in server.requests if p == "/api/chat")
    traces = read(workspace.out) + read(workspace.rejects)
    assert sessions == Counter({t["id"]: t["usage"]["requests"] for t in traces})
    assert max(sessions.values()) > 1  # p0 and p3 take several turns, all tagged alike


def test_the_run_header_says_which_tool_parser_native_tools_uses(cli, model, workspace):
    args = workspace.args(model, "--mode", "native-tools", "--limit", "1", "--tool-parser", "qwen")
    result = cli(args)
    assert "tool parser: hermes (--tool-parser)" in result.output, result.output
    auto = cli([*workspace.args(model, "--mode", "native-tools", "--limit", "1"), "--overwrite"])
    assert "tool parser: every format in turn" in auto.output, auto.output


def test_an_unknown_tool_parser_is_one_line_and_exit_2(cli, model, workspace):
    result = cli(workspace.args(model, "--mode", "native-tools", "--tool-parser", "nope"))
    assert result.exit_code == 2
    assert "unknown tool parser 'nope'" in result.output


def test_auto_reads_the_embedded_models_chat_template_and_the_hash_ignores_its_choice():
    from types import SimpleNamespace

    from tracegen.config import RunSettings
    from tracegen.generate.setup import tool_parser

    template = "{{- '<|im_system|>tool_declare<|im_middle|>' -}}"  # Kimi-K2's (llama.cpp's copy)
    local = SimpleNamespace(
        local=SimpleNamespace(template=None, info=SimpleNamespace(chat_template=template))
    )
    settings = RunSettings(model="model.gguf", mode="native-tools")
    chosen, said = tool_parser(settings, settings.model, local)  # type: ignore[arg-type]
    assert chosen == "kimi_k2"
    assert said == "tool parser: kimi_k2 (the chat template writes <|im_system|>tool_declare)"
    explicit = settings.model_copy(update={"tool_parser": "auto"})
    assert explicit.generation().digest("p") == settings.generation().digest("p")


@pytest.mark.slow  # tracegen in a child process
def test_the_run_header_records_the_backend_and_model_auto_decided(model, workspace):
    """``--backend auto`` (the default) finds Ollama answering: the opening line and the state
    file's header say so, with the model, mode and problem set the run decided."""
    result = tracegen([*workspace.args(model, "--limit", "2")])
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    opening = next(line for line in said.splitlines() if "tracegen run:" in line)
    assert f"mode markers · backend ollama · model test-model · problems {workspace.problems}" in (
        opening
    ), said
    header = orjson.loads(state_path(workspace.out).read_bytes().splitlines()[0])
    assert header["run"]["backend"] == "ollama"
    assert header["run"]["model"] == "test-model"
    assert header["run"]["problems"] == str(workspace.problems)


@pytest.mark.slow  # tracegen in a child process, twice
def test_a_state_file_of_a_tracegen_that_recorded_no_decisions_resumes(model, workspace):
    """A state header without ``run`` (written before runs recorded their decisions) is the
    same run: resumed, its episodes skipped, the rest run."""
    first = tracegen([*workspace.args(model, "--limit", "2")])
    assert first.returncode == 0, first.stderr
    state = state_path(workspace.out)
    head, *rest = state.read_bytes().splitlines()
    old = orjson.loads(head)
    del old["run"]
    state.write_bytes(b"\n".join([orjson.dumps(old), *rest]) + b"\n")
    again = tracegen([*workspace.args(model)])
    assert again.returncode == 0, again.stderr
    said = again.stdout + again.stderr
    assert "10 episodes to go (2 done before)" in said, said
    assert sorted(keys(workspace.out)) == sorted((f"p{i}", 0) for i in range(12))
    assert orjson.loads(state.read_bytes().splitlines()[0]) == old
