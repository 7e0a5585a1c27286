"""A model repeating itself is noticed before it fills its token budget."""

from __future__ import annotations

import pytest

from tracegen.episode.limits import repeated_tail


@pytest.mark.parametrize(
    ("text", "repeated"),
    [
        ("intro " + "I am stuck. " * 30, True),
        ("x" * 300, True),
        ("abc" * 10, False),
        ("def f(x):\n    return x\n" * 3, False),
        ("".join(f"line {i}\n" for i in range(200)), False),
    ],
)
def test_a_long_repeated_tail_is_detected(text: str, repeated: bool) -> None:
    assert repeated_tail(text) is repeated
