"""Which model the local backend runs and what it refuses, read from GGUF headers (no model
is loaded here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gguf import write_gguf
from tracegen.errors import ConfigError
from tracegen.llm.gguf import read_gguf
from tracegen.llm.packaged import find_model


def test_the_header_gives_family_context_template_kv_size_and_vocabulary(tmp_path: Path) -> None:
    info = read_gguf(write_gguf(tmp_path / "m.gguf", chat_template="{{ x }}", layers=3))
    assert (info.architecture, info.name, info.context_length) == ("llama", "Tiny Test", 2048)
    assert info.chat_template == "{{ x }}"
    assert info.kv_bytes_per_token == 2 * 3 * 2 * (64 // 4) * 2
    assert info.vocab == 3  # the embedded backend refuses token ids past it


def test_a_file_that_is_not_gguf_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("hello")
    with pytest.raises(ConfigError, match="not a GGUF model file"):
        read_gguf(path)


def test_a_truncated_header_is_one_line(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(ConfigError, match="truncated or damaged"):
        read_gguf(path)


def test_a_missing_file_names_the_packaged_models(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model file not found .*smollm2-135m"):
        find_model(str(tmp_path / "nope.gguf"))


def test_a_file_without_template_gets_its_familys(tmp_path: Path) -> None:
    model = find_model(str(write_gguf(tmp_path / "g.gguf", architecture="gemma3")))
    assert model.template is not None and "<start_of_turn>" in model.template
    assert model.template_source == "family gemma (gemma3)"


def test_a_file_without_template_of_an_unknown_family_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no chat template .*--chat-template FILE"):
        find_model(str(write_gguf(tmp_path / "m.gguf", architecture="mamba")))


def test_a_template_file_wins_over_the_files_own(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    model = find_model(str(write_gguf(tmp_path / "m.gguf", chat_template="x")), template)
    assert model.template == "{{ messages }}" and model.template_source == str(template)
