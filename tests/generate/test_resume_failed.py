"""An episode the server failed is recorded, kept out of the output, and run again when the
run is resumed: the new attempt's record replaces the failed one in every file of the run."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Reply
from tests.support.runs import Workspace, problem_number, solver, tracegen
from tests.support.scenarios import read_jsonl, unused_port

pytestmark = pytest.mark.slow  # whole runs in a child process

GARBAGE = Reply(content="<think>", tool_calls=[{"function": "not an object"}])
"""An unreadable answer: given twice in a row, the episode fails on the server's side
(``backend/repeated_answer``) at once. (Two episodes failing so stop the run: the server
is taken for broken; so each run here has one.)"""
ALL = sorted((f"p{i}", 0) for i in range(12))


def failing(broken: set[int]):
    def answer(path: str, body: dict[str, Any]) -> Reply:
        return GARBAGE if problem_number(body) in broken else solver(path, body)

    return answer


def asked(server: FakeOllama) -> Counter[int]:
    return Counter(problem_number(b) for p, b, _ in server.requests if p == "/api/chat")


def key_counts(*rows: list[dict[str, Any]]) -> Counter[tuple[str, int]]:
    return Counter((r["problem_id"], r["sample"]) for group in rows for r in group)


def run(workspace: Workspace, server: FakeOllama, *extra: str):
    args = workspace.args(server, "--rejects", str(workspace.rejects), *extra)
    return tracegen(args)


def test_failed_episodes_run_again_on_resume_and_their_records_are_replaced(
    workspace: Workspace, fake_ollama: FakeOllama
) -> None:
    state = workspace.out.with_name(workspace.out.name + ".state")
    fake_ollama.set_responder(failing({4}))
    first = run(workspace, fake_ollama)
    assert first.returncode == 0, first.stderr
    failed = read_jsonl(workspace.rejects)
    assert [(r["problem_id"], r["error"]["kind"]) for r in failed] == [("p4", "backend")]
    assert len(read_jsonl(workspace.out)) == 11
    assert [r["outcome"] for r in read_jsonl(state)[1:]].count("failed") == 1

    fake_ollama.requests.clear()
    fake_ollama.set_responder(solver)
    second = run(workspace, fake_ollama)
    assert second.returncode == 0, second.stderr
    assert "1 episodes the server, the sandbox or tracegen failed run again" in second.stdout
    assert "1 episodes to go (11 done before)" in second.stdout
    assert set(asked(fake_ollama)) == {4}  # only the failed episode, nothing else
    out, rejects, lines = (
        read_jsonl(workspace.out),
        read_jsonl(workspace.rejects),
        read_jsonl(state),
    )
    assert sorted(key_counts(out)) == ALL and set(key_counts(out).values()) == {1}
    assert rejects == []  # the failed attempts' records are gone, not kept beside the new ones
    assert "settings" in lines[0] and [r for r in lines[1:] if "settings" in r] == []
    assert key_counts(lines[1:]) == key_counts(out)
    assert {r["outcome"] for r in lines[1:]} == {"accepted"}

    stats = tracegen(["stats", str(workspace.out), str(workspace.rejects), "--json"])
    assert stats.returncode == 0, stats.stderr
    assert '"traces":12' in stats.stdout.replace(" ", "")

    fake_ollama.requests.clear()
    third = run(workspace, fake_ollama)
    assert "nothing to do" in third.stdout and not asked(fake_ollama)


def test_an_episode_that_fails_again_keeps_one_record_and_others_are_left_alone(
    workspace: Workspace, fake_ollama: FakeOllama
) -> None:
    state = workspace.out.with_name(workspace.out.name + ".state")
    fake_ollama.set_responder(failing({9}))
    assert run(workspace, fake_ollama).returncode == 0

    fake_ollama.requests.clear()
    fewer = run(workspace, fake_ollama, "--limit", "5")  # p9 is not in this run's plan
    assert "nothing to do" in fewer.stdout and not asked(fake_ollama)
    assert key_counts(read_jsonl(workspace.rejects)) == {("p9", 0): 1}

    again = run(workspace, fake_ollama)  # p9 fails again: the run made nothing (exit 1)
    assert again.returncode == 1 and "all 1 failed on the server" in again.stderr
    assert "1 episodes the server, the sandbox or tracegen failed run again" in again.stdout
    assert set(asked(fake_ollama)) == {9}
    (rejected,) = read_jsonl(workspace.rejects)
    assert (rejected["problem_id"], rejected["error"]["kind"]) == ("p9", "backend")
    failed_lines = [r for r in read_jsonl(state)[1:] if r["outcome"] == "failed"]
    assert [r["id"] for r in failed_lines] == [rejected["id"]]

    fake_ollama.requests.clear()
    fake_ollama.set_responder(solver)
    last = run(workspace, fake_ollama)
    assert last.returncode == 0, last.stderr
    assert set(asked(fake_ollama)) == {9}
    assert read_jsonl(workspace.rejects) == []
    assert sorted(key_counts(read_jsonl(workspace.out))) == ALL


def test_a_resume_that_reaches_no_server_leaves_the_failed_records_as_they_were(
    workspace: Workspace, fake_ollama: FakeOllama
) -> None:
    state = workspace.out.with_name(workspace.out.name + ".state")
    fake_ollama.set_responder(failing({4}))
    assert run(workspace, fake_ollama).returncode == 0
    before = [p.read_bytes() for p in (workspace.out, workspace.rejects, state)]
    dead = workspace.args(f"http://127.0.0.1:{unused_port()}", "--rejects", str(workspace.rejects))
    gone = tracegen(dead)
    assert gone.returncode == 1, gone.stderr
    assert [p.read_bytes() for p in (workspace.out, workspace.rejects, state)] == before
