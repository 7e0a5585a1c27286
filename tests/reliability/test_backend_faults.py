"""A run against a server that fails 30% of its requests still accounts for every episode."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tests.support.runs import child_env, partial_of, tracegen
from tests.support.scenarios import (
    TRACEBACK,
    builtin,
    episodes,
    error_line,
    generations,
    markers_reply,
    problem_of,
    read_jsonl,
    reference_solver,
    run_args,
    seed_of,
    serving,
)
from tracegen.generate.executor import MAX_PUT_BACKS
from tracegen.generate.plan import episode_seed

pytestmark = pytest.mark.slow  # whole runs in a child process against a faulty server

FAULTS = [
    Fault("status", 503),
    Fault("status", 429),
    Fault("status", 500),
    Fault("drop"),
    Fault("error_line"),
    Fault("malformed"),
    Fault("stall", seconds=2),
]
MAX_ATTEMPTS = 5
"""Attempts per request of the Ollama backend as `tracegen run` builds it."""
EPISODE_BOUND = MAX_ATTEMPTS * (1 + MAX_PUT_BACKS)
"""Requests one single-turn episode may cost: its attempts, each time it is run again."""
GARBAGE = Reply(content="<think>", tool_calls=[{"function": "not an object"}])
"""What the server answers for one episode, every time: a malformed tool call."""
RETRIED = {"protocol_error", "server_error", "overloaded"}
"""Why an episode can end when all its attempts fail (on a fault, or that broken answer)."""
SEED = 11
CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>'


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_run_against_a_server_failing_30_percent_of_requests_loses_nothing(
    tmp_path: Path, kind: str
) -> None:
    problems = builtin(10)
    broken = (problems[3].id, 2)
    broken_seed = episode_seed(SEED, *broken)
    # Any other episode may also fail, when all of its attempts meet a fault (p ≈ 0.1%).

    def model(path: str, body: dict[str, Any]) -> Reply:
        problem = problem_of(body, problems)
        if (problem.id, seed_of(body)) == (broken[0], broken_seed):
            return GARBAGE
        assert problem.reference_solution is not None
        return markers_reply(problem.reference_solution)

    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    with serving(kind) as (server, host):
        server.set_responder(model)
        server.fail_randomly(0.3, FAULTS, seed=8)
        args = run_args(
            host,
            out,
            "--limit",
            "10",
            "--num-samples",
            "4",
            "--seed",
            str(SEED),
            "--rejects",
            str(rejects),
        )
        done = tracegen(args, env=child_env(TRACEGEN_RETRY_INITIAL_S="0.2"))
        chats = generations(server)
        faults = server.faults_injected
    assert done.returncode == 0, done.stderr
    assert TRACEBACK not in done.stderr

    accepted, failed = read_jsonl(out), read_jsonl(rejects)
    everything = sorted((p.id, s) for p in problems for s in range(4))
    assert sorted(episodes(accepted, failed)) == everything
    assert len({r["id"] for r in accepted + failed}) == 40
    assert all(r["error"] is None and r["verdict"]["status"] == "ok" for r in accepted)
    assert broken in episodes(failed)
    for record in failed:
        assert record["error"]["kind"] == "backend"
        assert record["error"]["reason"] in RETRIED
        assert record["error"]["message"]
    assert len(read_jsonl(tmp_path / "traces.jsonl.state")) == 1 + 40

    attempts: Counter[tuple[str, int]] = Counter(
        (problem_of(body, problems).id, seed_of(body)) for body in chats
    )
    gave_up = [attempts.pop((p, episode_seed(SEED, p, s))) for p, s in episodes(failed)]
    retried = sum(faults.values()) - faults["stall"]
    figure = (
        f"{len(chats)} requests for 40 episodes, faults injected: {dict(faults)}, "
        f"{len(failed)} episodes failed"
    )
    assert gave_up == [EPISODE_BOUND] * len(failed), figure
    assert len(attempts) == len(accepted) and max(attempts.values()) <= EPISODE_BOUND, figure
    retries_of_accepted = sum(attempts.values()) - len(accepted)
    assert retries_of_accepted <= retried <= retries_of_accepted + sum(gave_up), figure
    assert faults["stall"] > 0 and retried >= 10, figure


def test_a_server_that_stops_answering_is_timed_out_and_retried(tmp_path: Path) -> None:
    problems = builtin(4)
    out = tmp_path / "traces.jsonl"
    with FakeOllama() as server:
        server.set_responder(reference_solver(problems))
        server.fail_next(Fault("stall", seconds=60), Fault("stall", seconds=60))
        done = tracegen(
            run_args(server.url, out, "--limit", "4"),
            env=child_env(TRACEGEN_REQUEST_TIMEOUT_S="1"),
        )
        chats = [path for path, _, _ in server.requests if path == "/api/chat"]
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("did not answer within 1s") == 2, done.stderr
    assert len(chats) == 4 + 2
    assert sorted(episodes(read_jsonl(out))) == sorted((p.id, 0) for p in problems)


@pytest.mark.parametrize(
    ("kind", "continuation"),
    [("ollama", "prefill"), ("ollama", "raw"), ("openai", "continue"), ("llamacpp", "raw")],
)
def test_faults_while_continuing_a_message_duplicate_nothing_in_it(
    tmp_path: Path, kind: str, continuation: str
) -> None:
    problems = builtin(6)

    def model(path: str, body: dict[str, Any]) -> Reply:
        if "prompt" in body:
            problem = next(p for p in problems if p.prompt.strip() in body["prompt"])
        else:
            problem = problem_of(body, problems)
        if "<tool_response>" not in partial_of(body):
            return Reply(content=f"<think>Try it.\n{CALL}")
        return Reply(content=f"It prints 42.</think>\n<code>\n{problem.reference_solution}</code>")

    out = tmp_path / "traces.jsonl"
    with serving(kind) as (server, host):
        server.set_responder(model)
        server.fail_randomly(0.3, FAULTS[:-1], seed=5)
        done = tracegen(
            run_args(
                host,
                out,
                "--limit",
                "6",
                "--num-samples",
                "2",
                "--continuation",
                continuation,
                mode="inline-tools",
            )
        )
        faults = sum(server.faults_injected.values())
    assert done.returncode == 0, done.stderr
    traces = read_jsonl(out)
    assert sorted(episodes(traces)) == sorted((p.id, s) for p in problems for s in range(2))
    for trace in traces:
        (answer,) = [m["content"] for m in trace["messages"] if m["role"] == "assistant"]
        counts = [answer.count(tag) for tag in ("<tool_call>", "<tool_response>", "</think>")]
        assert counts == [1, 1, 1], f"{trace['problem_id']} after {faults} faults: {answer}"
        assert trace["success"] and trace["continuation"] == continuation


def test_a_model_removed_mid_run_stops_it_with_one_line_and_resume_finishes(
    tmp_path: Path,
) -> None:
    problems = builtin(12)
    solve = reference_solver(problems)
    out = tmp_path / "traces.jsonl"
    with FakeOllama() as server:
        capabilities = server.models["test-model"]

        def model_then_gone(path: str, body: dict[str, Any]) -> Reply:
            if sum(p == "/api/chat" for p in server.paths()) >= 5:
                server.models.pop("test-model", None)
            return solve(path, body)

        server.set_responder(model_then_gone)
        args = run_args(server.url, out, "--limit", "12", "--concurrency", "1")
        stopped = tracegen(args)
        before = episodes(read_jsonl(out))
        server.models["test-model"] = capabilities
        server.set_responder(solve)
        resumed = tracegen(args)
    assert stopped.returncode == 1, stopped.stderr
    assert "ollama pull test-model" in error_line(stopped.stderr)
    assert 0 < len(before) < 12
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(episodes(read_jsonl(out))) == sorted((p.id, 0) for p in problems)
