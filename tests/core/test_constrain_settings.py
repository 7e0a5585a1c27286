"""Settings of the local backend and of constrained decoding, as the settings hash sees them."""

from __future__ import annotations

from pathlib import Path

from tracegen.config import GenerationSettings


def test_unconstrained_runs_keep_the_hash_files_were_made_with() -> None:
    record = GenerationSettings(constrain="off").record("prompt")
    assert "constrain" not in record and "chat_template" not in record
    assert GenerationSettings(constrain="off").digest("p") == GenerationSettings().digest("p")


def test_constraining_or_a_template_changes_the_hash() -> None:
    plain = GenerationSettings().digest("p")
    assert GenerationSettings(constrain="on").digest("p") != plain
    assert GenerationSettings(chat_template=Path("t.jinja")).digest("p") != plain
