"""What `Sequences` offers a prompt: the ids of the longest earlier sequence its text starts
with, about one sequence per episode in flight."""

from __future__ import annotations

from tracegen.llm.sequences import Sequences


def test_the_longest_sequence_a_prompt_starts_with_is_offered_with_the_rest() -> None:
    seen = Sequences()
    seen.remember("<s>hi", [1, 2])
    seen.remember("<s>other", [1, 9])
    seen.remember("<s>hi there", [1, 2, 3])
    assert seen.join("<s>hi there, friend") == ([1, 2, 3], ", friend")
    assert seen.join("<s>other") == ([1, 9], "")
    assert seen.join("<s>new") is None


def test_a_sequence_is_forgotten_once_a_newer_one_goes_on_from_it() -> None:
    seen = Sequences()
    seen.remember("<s>hi", [1, 2])
    seen.remember("<s>hi there", [1, 2, 3])
    assert seen.join("<s>hi, friend") is None


def test_only_the_newest_sequences_are_kept() -> None:
    seen = Sequences(size=3)
    for n in range(4):
        seen.remember(f"<s>{n}", [n])
    assert seen.join("<s>0") is None
    assert seen.join("<s>3!") == ([3], "!")
