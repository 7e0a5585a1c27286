"""System prompts: shipped per mode, overridable per mode with a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.episodes import ADD, TWICE
from tracegen.data.prompts import load_prompt, task_message
from tracegen.errors import ConfigError
from tracegen.modes import MODE_NAMES, get_mode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prompts"


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_every_mode_ships_a_prompt_that_forbids_writing_the_systems_text(mode: str) -> None:
    prompt = load_prompt(mode, None)
    assert "sum_even" in prompt or mode == "native-tools"
    assert "never write" in prompt.lower() or "never write them" in prompt.lower()
    assert get_mode(mode).name == mode


def test_an_override_folder_replaces_only_the_modes_it_holds() -> None:
    assert load_prompt("inline-tools", EXAMPLES) == (EXAMPLES / "inline-tools.txt").read_text()
    assert load_prompt("markers", EXAMPLES) == load_prompt("markers", None)


def test_a_missing_override_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="prompts folder not found"):
        load_prompt("markers", tmp_path / "nowhere")


def test_an_empty_override_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "markers.txt").write_text("  \n")
    with pytest.raises(ConfigError, match="empty"):
        load_prompt("markers", tmp_path)


def test_an_unknown_mode_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: markers, forced-interleave"):
        get_mode("telepathy")


def test_a_mode_without_a_shipped_prompt_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no prompt is shipped for mode 'telepathy'"):
        load_prompt("telepathy", None)


def test_the_task_says_what_the_answer_must_define_or_end_with() -> None:
    assert task_message(ADD).endswith("Your final program must define `add`.")
    assert task_message(TWICE).endswith("as `#### <number>`.")
