"""Whole runs against the hostile stand-ins (`tests.support.hostile_wire`): whatever a server
does, the run ends within the outage window (``max_outage_s``) plus 30 s, with exit 1 and one
line saying why; a server sending the same unreadable answer ends it within 30 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.fake_model import Fault
from tests.support.runs import child_env, tracegen
from tests.support.scenarios import TRACEBACK, builtin, reference_solver, run_args, serving

pytestmark = pytest.mark.slow  # whole runs in a child process

OUTAGE_S = 5.0
"""The outage window these runs are given (``--max-outage-s``)."""
GRACE_S = 30.0

CASES = [
    ("ollama", Fault("status", 500), "(HTTP 500)"),
    ("openai", Fault("status", 503), "(HTTP 503)"),
    ("ollama", Fault("drop"), ""),
    ("openai", Fault("wire", message="headers-then-close"), "dropped the connection mid-response"),
    ("openai", Fault("wire", message="continue-loop", seconds=0.2), "interim (1xx)"),
    ("ollama", Fault("wire", message="slow-drip"), "did not answer within 5s"),
    ("ollama", Fault("wire", message="event-stream"), "it began: b'data: "),
    ("openai", Fault("wire", message="impossible-ids"), "outside any vocabulary"),
    ("llamacpp", Fault("wire", message="status-2001"), "it began: b'HTTP/1.1 2001 OK"),
    ("openai", Fault("malformed"), "not JSON"),
]
REPEATED = {"event-stream", "impossible-ids", "status-2001", "continue-loop"}
"""The cases whose every answer is the same unreadable one: over within 30 s."""


@pytest.mark.parametrize(
    ("kind", "fault", "cause"),
    CASES,
    ids=[f"{k}-{f.message or f.kind}{f.status or ''}" for k, f, _ in CASES],
)
def test_a_hostile_server_ends_the_run_within_the_outage_window_with_exit_1(
    tmp_path: Path, kind: str, fault: Fault, cause: str
) -> None:
    problems = builtin(6)
    out = tmp_path / "traces.jsonl"
    # The default request timeout (600 s): a dripped answer is cut at the outage window.
    env = child_env(TRACEGEN_RETRY_INITIAL_S="0.05")
    args = ("--limit", "6", "--concurrency", "2", "--max-outage-s", str(OUTAGE_S))
    with serving(kind) as (server, host):
        server.set_responder(reference_solver(problems))
        server.fail_randomly(1.0, [fault], seed=1)
        started = time.monotonic()
        done = tracegen(run_args(host, out, *args), env=env, timeout=120)
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert TRACEBACK not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tracegen: error: ") and cause in last, done.stderr
    bound = GRACE_S if (fault.message or "") in REPEATED or fault.kind == "malformed" else None
    assert took < (bound or OUTAGE_S + GRACE_S), (took, done.stderr[-2000:])
