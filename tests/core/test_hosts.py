"""Where `tracegen run` looks for Ollama: flags, OLLAMA_HOST, the way Ollama itself reads it."""

from __future__ import annotations

import pytest

from tracegen.config import RunSettings, load_settings


@pytest.mark.parametrize(
    ("value", "host"),
    [
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("gpu1", "http://gpu1:11434"),
        ("gpu1:8080", "http://gpu1:8080"),
        ("[::1]", "http://[::1]:11434"),
        ("http://gpu1", "http://gpu1"),
        ("https://ollama.com", "https://ollama.com"),
    ],
)
def test_ollama_host_without_a_scheme_or_port_uses_ollamas_default_port(value, host):
    settings = load_settings(RunSettings, {}, env={"OLLAMA_HOST": value})
    assert settings.hosts == [host]
