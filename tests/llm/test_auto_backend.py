"""What ``--backend auto`` runs: a server when one is named or answers at Ollama's default
address, else the embedded model, said in one line. Nothing is loaded here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.scenarios import unused_port
from tracegen.config import RunSettings
from tracegen.errors import ConfigError
from tracegen.llm import factory
from tracegen.llm.packaged import DEFAULT_MODEL


async def choose(monkeypatch: pytest.MonkeyPatch, default_host: str, **given: Any) -> tuple:
    monkeypatch.setattr(factory, "DEFAULT_HOST", default_host)
    said: list[str] = []
    settings = await factory.choose_backend(RunSettings(**given), said.append)
    return settings.backend, settings.model, said


@pytest.fixture
def nothing() -> str:
    """Ollama's default address where nothing answers."""
    return f"http://127.0.0.1:{unused_port()}"


async def test_with_nothing_named_and_nothing_answering_the_embedded_model_runs(
    monkeypatch: pytest.MonkeyPatch, nothing: str
) -> None:
    backend, model, said = await choose(monkeypatch, nothing)
    assert (backend, model) == ("local", DEFAULT_MODEL)
    assert said == [
        f"no model server at {nothing} and none configured: running {DEFAULT_MODEL} in "
        "process (--backend local; --host names a server)"
    ]


async def test_a_server_answering_at_the_default_address_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOllama() as ollama:
        assert await choose(monkeypatch, ollama.url) == ("auto", "qwen3:8b", [])


@pytest.mark.parametrize("given", [{"hosts": ["gpu1"]}, {"model": "qwen3:8b"}])
async def test_a_named_host_or_model_means_a_server_even_when_none_answers(
    monkeypatch: pytest.MonkeyPatch, nothing: str, given: dict[str, Any]
) -> None:
    backend, _, said = await choose(monkeypatch, nothing, **given)
    assert (backend, said) == ("auto", [])


@pytest.mark.parametrize("named", ["file", "packaged"])
async def test_a_model_only_the_embedded_backend_runs_is_run_in_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, named: str
) -> None:
    """``--model ~/models/x.gguf`` with no host means this file, in process: no server is
    asked (nothing answers at the default address either way)."""
    model = DEFAULT_MODEL
    if named == "file":
        model = str(tmp_path / "qwen2.5-coder-7b-q4_k_m.gguf")
        Path(model).write_bytes(b"GGUF")
    monkeypatch.setattr(factory, "identify", None)  # asking a server would fail loudly
    backend, chosen, said = await choose(monkeypatch, "http://unused", model=model)
    assert (backend, chosen) == ("local", model)
    assert said == [f"running {model} in process (--backend local; --host names a server)"]


@pytest.mark.parametrize(
    "given",
    [
        {"model": "missing.gguf"},
        {"model": DEFAULT_MODEL, "hosts": ["http://gpu1:8000/v1"]},
    ],
)
async def test_a_gguf_that_is_not_there_or_a_named_host_still_means_a_server(
    monkeypatch: pytest.MonkeyPatch, nothing: str, given: dict[str, Any]
) -> None:
    backend, _, said = await choose(monkeypatch, nothing, **given)
    assert (backend, said) == ("auto", [])


async def test_a_local_run_names_its_model_or_takes_the_packaged_default() -> None:
    chosen = await factory.choose_backend(RunSettings(backend="local"), print)
    assert chosen.model == DEFAULT_MODEL
    given = await factory.choose_backend(RunSettings(backend="local", model="m.gguf"), print)
    assert given.model == "m.gguf"


async def test_constraining_a_backend_known_to_take_no_grammar_is_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="--constrain on needs a backend that takes a grammar"):
        await factory.choose_backend(RunSettings(backend="ollama", constrain="on"), print)
