"""A run against a server that fails 30% of its requests still accounts for every episode."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tests.support.runs import child_env, partial_of, spawn, tracegen
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
from tracegen.errors import EPISODE_TRIES as MAX_PUT_BACKS
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
"""Why an episode can end when all its attempts fail on faults."""
REPEATED = "repeated_answer"
"""Why one ends when a request is answered the same unreadable way twice in a row (that
broken answer; by chance, two malformed bodies): recorded at once, never run again."""
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
        assert record["error"]["reason"] in RETRIED | {REPEATED}
        assert record["error"]["message"]
    reasons = {(r["problem_id"], r["sample"]): r["error"]["reason"] for r in failed}
    assert reasons[broken] == REPEATED
    assert len(read_jsonl(tmp_path / "traces.jsonl.state")) == 1 + 40

    attempts: Counter[tuple[str, int]] = Counter(
        (problem_of(body, problems).id, seed_of(body)) for body in chats
    )
    gave_up = [attempts.pop((p, episode_seed(SEED, p, s))) for p, s in episodes(failed)]
    bounds = [EPISODE_BOUND if reasons[e] != REPEATED else None for e in episodes(failed)]
    retried = sum(faults.values()) - faults["stall"]
    figure = (
        f"{len(chats)} requests for 40 episodes, faults injected: {dict(faults)}, "
        f"{len(failed)} episodes failed"
    )
    # A repeated answer ends its run at once, but the episode's earlier runs may have ended
    # otherwise (its garbage and faults alternating until the attempts were spent).
    for asked, bound in zip(gave_up, bounds, strict=True):
        assert asked == bound if bound is not None else 2 <= asked <= EPISODE_BOUND, figure
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
        args = run_args(
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
        done = tracegen(args)
        # The same unreadable answer twice in a row (chance, at 30%) ends a request: that
        # episode is the server's failure, recorded, and run again by the same command.
        for _ in range(2):
            if len(read_jsonl(out)) == 12 or done.returncode != 0:
                break
            done = tracegen(args)
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


WIRE_FORGIVEN = [
    Fault("wire", message=name)
    for name in (
        "endless-chunked",
        "huge-body",
        "bad-chunk",
        "conflicting-lengths",
        "http-1.9",
        "bare-lf",
        "gzip",
        "impossible-ids",
        "late-answer",
    )
]
"""Misbehaviours a run outlives: each answer refused (or, gzip, decoded) and asked again."""


@pytest.mark.parametrize("kind", ["openai", "llamacpp"])
def test_a_run_against_a_server_misbehaving_on_the_wire_records_nothing_wrong(
    tmp_path: Path, kind: str
) -> None:
    problems = builtin(8)
    out = tmp_path / "traces.jsonl"
    with serving(kind) as (server, host):
        server.set_responder(reference_solver(problems))
        server.fail_randomly(0.25, [*WIRE_FORGIVEN, Fault("wire", message="slow-drip")], seed=3)
        done = tracegen(
            run_args(host, out, "--limit", "8", "--num-samples", "2", "--concurrency", "2"),
            env=child_env(TRACEGEN_RETRY_INITIAL_S="0.05", TRACEGEN_REQUEST_TIMEOUT_S="2"),
        )
        faults = dict(server.faults_injected)
    assert done.returncode == 0, done.stderr
    assert TRACEBACK not in done.stderr
    traces = read_jsonl(out)
    assert sorted(episodes(traces)) == sorted((p.id, s) for p in problems for s in range(2))
    for trace in traces:  # each answer is its own request's: the reference solution passes
        assert trace["success"], (trace["problem_id"], faults)
        for asked in trace.get("token_requests") or []:
            ids = asked["prompt_ids"] + asked["completion_ids"]
            assert all(0 <= i < 151_936 for i in ids), trace["problem_id"]
    assert faults.get("wire", 0) >= 3, faults


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Fault("status", 500), "(HTTP 500)"),
        (Fault("wire", message="status-2001"), "it began: b'HTTP/1.1 2001 OK"),
        (Fault("wire", message="event-stream"), "it began: b'data: {"),
    ],
    ids=["500-forever", "garbage-status", "event-stream-to-stream-false"],
)
def test_a_server_that_never_answers_usably_ends_the_run_with_exit_1_and_one_line(
    tmp_path: Path, fault: Fault, cause: str
) -> None:
    """No trace because of the server: exit 1 and the cause on the last line; a server
    answering the same unreadable answer is asked twice, and the same command finishes the
    run once the server is well. (500 forever takes ~35 s: the host is benched 5, 10 and 20 s
    between the episode's six runs.)"""
    problems = builtin(1)
    out = tmp_path / "traces.jsonl"
    args = run_args("", out, "--limit", "1")
    with FakeOllama() as server:
        server.set_responder(reference_solver(problems))
        server.fail_randomly(1.0, [fault], seed=1)
        args[args.index("--host") + 1] = server.url
        # One attempt per request for 500s (each episode's six runs are what is counted),
        # the default five for unreadable answers (the second alike ends the request).
        attempts = "1" if fault.kind == "status" else "5"
        env = child_env(TRACEGEN_RETRY_INITIAL_S="0.01", TRACEGEN_MAX_ATTEMPTS=attempts)
        done = tracegen(args, env=env)
        asked = len(generations(server))
        server.fail_randomly(0.0, [fault], seed=1)
        resumed = tracegen(args, env=env)
    assert done.returncode == 1, done.stderr
    assert TRACEBACK not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tracegen: error: ") and cause in last, done.stderr
    assert resumed.returncode == 0, resumed.stderr
    if fault.kind == "wire":  # the same unreadable answer twice: not asked a third time
        assert asked == 2, asked
    # the episode the server failed is run again once the server is well, and kept once
    assert "run again" in resumed.stdout + resumed.stderr, resumed.stdout
    (trace,) = read_jsonl(out)
    assert trace["success"] and trace["problem_id"] == problems[0].id


@pytest.mark.parametrize(
    "fault",
    [Fault("stall", seconds=120), Fault("wire", message="slow-drip", seconds=0.5)],
    ids=["silent", "dripping"],
)
def test_sigterm_ends_a_run_within_10_s_whatever_the_server_does(
    tmp_path: Path, fault: Fault
) -> None:
    problems = builtin(8)
    out = tmp_path / "traces.jsonl"
    with FakeOllama() as server:
        server.set_responder(reference_solver(problems))
        server.fail_randomly(1.0, [fault], seed=1)
        proc = spawn(run_args(server.url, out, "--limit", "8", "--concurrency", "4"))
        try:
            deadline = time.monotonic() + 60
            while len(generations(server)) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(generations(server)) == 4
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            _, stderr = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert took < 10, took
    assert proc.returncode == 143, stderr
    assert TRACEBACK not in stderr
    # no server answered: the run leaves no files behind
    assert not out.exists()
    assert not (tmp_path / "traces.jsonl.state").exists()
