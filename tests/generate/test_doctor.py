"""`tracegen doctor` end to end against the loopback server."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tracegen.cli import app
from tracegen.generate import doctor as doctor_module

CLEAN_ENV = {"OLLAMA_API_KEY": "", "OLLAMA_HOST": "", "COLUMNS": "200"}


def doctor(*args: str, **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", *args], env={**CLEAN_ENV, **env})
    return result.exit_code, result.output


def test_all_well_prints_the_table_and_exits_0(fake_ollama: FakeOllama) -> None:
    code, out = doctor("--host", fake_ollama.url, "--model", "test-model")
    assert code == 0, out
    assert f"{fake_ollama.url} reachable, Ollama" in out
    assert "test-model present" in out
    assert "test-model supports tools" in out and "test-model supports thinking" in out
    assert "returned (1 token(s))" in out
    assert "every format in turn (neither the chat template nor the model's name" in out
    assert "sandbox" in out and "ready" in out
    probe = fake_ollama.requests[-1][1]
    assert probe["logprobs"] is True and probe["options"]["num_predict"] == 1


def test_unknown_model_fails_and_says_how_to_get_it(fake_ollama: FakeOllama) -> None:
    code, out = doctor("--host", fake_ollama.url, "--model", "qwen3:8b")
    assert code == 1
    assert "run `ollama pull qwen3:8b`" in out and "available: test-model" in out
    assert "logprobs" not in out


def test_unreachable_host_is_one_failing_row() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out = doctor("--host", f"127.0.0.1:{port}", "--model", "m")
    assert code == 1
    assert f"cannot reach Ollama at http://127.0.0.1:{port}: is `ollama serve` running?" in out
    assert "Traceback" not in out


@pytest.mark.timeout(60)
def test_a_host_that_never_answers_is_one_failing_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_module, "PROBE_TIMEOUT_S", 0.5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        code, out = doctor("--host", f"127.0.0.1:{port}", "--model", "m")
    assert code == 1
    assert f"http://127.0.0.1:{port} did not answer within 0.5s" in out


def test_missing_logprobs_are_reported_and_fail_only_when_required(
    fake_ollama: FakeOllama,
) -> None:
    fake_ollama.set_responder(lambda path, body: Reply(content="OK", logprobs=False))
    code, out = doctor("--host", fake_ollama.url, "--model", "test-model")
    assert code == 0 and "the server returned none" in out and "warn" in out
    code, out = doctor(
        "--host", fake_ollama.url, "--model", "test-model", TRACEGEN_REQUIRE_LOGPROBS="true"
    )
    assert code == 1 and "--require-logprobs is set" in out


def test_a_missing_capability_fails_only_when_the_settings_need_it() -> None:
    with FakeOllama(models={"small": ["completion"]}) as server:
        code, out = doctor("--host", server.url, "--model", "small")
        assert code == 0 and "not supported (not needed by your settings)" in out
        code, out = doctor("--host", server.url, "--model", "small", TRACEGEN_MODE="native-tools")
        assert code == 1 and "not supported (needed by your settings)" in out


def test_a_rejected_key_is_named_but_never_printed(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_next(Fault("status", status=401))
    secret = "sk-doctor-secret-42"
    code, out = doctor("--host", fake_ollama.url, "--model", "test-model", OLLAMA_API_KEY=secret)
    assert code == 1 and "OLLAMA_API_KEY was rejected" in out and secret not in out
    assert fake_ollama.requests[0][2]["authorization"] == f"Bearer {secret}"


def test_every_host_is_checked() -> None:
    with FakeOllama() as a, FakeOllama(models={}) as b:
        code, out = doctor("--host", a.url, "--host", b.url, "--model", "test-model")
        assert code == 1
        assert f"{a.url} reachable" in out and f"{b.url} reachable" in out
        assert "run `ollama pull test-model`" in out


def test_the_tool_parser_auto_picks_is_shown(fake_ollama: FakeOllama) -> None:
    code, out = doctor("--host", fake_ollama.url, "--model", "test-model", "--tool-parser", "qwen")
    assert code == 0, out
    assert "hermes (--tool-parser)" in out


def test_an_unknown_tool_parser_fails_its_row(fake_ollama: FakeOllama) -> None:
    code, out = doctor("--host", fake_ollama.url, "--model", "test-model", "--tool-parser", "x")
    assert code == 1
    assert "unknown tool parser 'x'" in out
