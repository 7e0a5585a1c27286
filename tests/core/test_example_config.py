"""The example config is a working `tracegen run` configuration."""

from __future__ import annotations

from pathlib import Path

from tracegen.config import RunSettings, load_settings
from tracegen.data.prompts import load_prompt
from tracegen.modes import get_mode

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.toml"


def test_example_config_loads_for_a_local_ollama():
    settings = load_settings(RunSettings, {}, config_file=EXAMPLE, env={})
    assert settings.hosts == ["http://localhost:11434"]
    assert settings.output == Path("traces.jsonl")
    assert settings.rejects == Path("rejects.jsonl")
    assert settings.only_ideal
    assert get_mode(settings.mode).name == settings.mode
    assert load_prompt(settings.mode, settings.prompts_dir)


def test_flags_override_the_example_config():
    settings = load_settings(RunSettings, {"concurrency": 16}, config_file=EXAMPLE, env={})
    assert settings.concurrency == 16
