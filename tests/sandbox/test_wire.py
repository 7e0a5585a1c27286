"""Plain data between the program's process and the judge's: what crosses, what is refused."""

from __future__ import annotations

import hmac
import math
from typing import Any

import pytest

from tracegen.sandbox import _harness, _wire


def cross(value: Any) -> Any:
    """``value`` as the other process sees it."""
    return _wire.decode(_wire.loads(_wire.dumps(["ok", _wire.encode(value)]))[1])


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        -(2**200),
        0.1,
        -0.0,
        "é\n\x00",
        b"\x00\xff",
        3 - 4j,
        (1, [2, (3,)]),
        {1: "a", (2, 3): frozenset({4}), "s": {5}},
        [],
        {},
    ],
)
def test_plain_values_cross_as_themselves(value: Any) -> None:
    assert cross(value) == value
    assert type(cross(value)) is type(value)


def test_nan_and_infinities_cross() -> None:
    got = cross([math.nan, math.inf, -math.inf])
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


def test_a_list_nested_ten_thousand_deep_crosses() -> None:
    deep: list[Any] = [7]
    for _ in range(10_000):
        deep = [deep, 1]
    got, depth = cross(deep), 0
    while len(got) == 2:
        got, depth = got[0], depth + 1
    assert (depth, got) == (10_000, [7])


class Yes(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def test_values_that_are_not_plain_are_refused_with_what_they_are() -> None:
    looped: list[Any] = []
    looped.append(looped)
    for value, reason in [
        (Yes(1), "Yes (a subclass of int)"),
        ([Yes(1)], "Yes (a subclass of int)"),
        ((x for x in ()), "a generator"),
        (print, "a callable builtin_function_or_method"),
        (looped, "a list that contains itself"),
        ([0] * (_wire.MAX_ITEMS + 1), "more than 2,000,000 items"),
    ]:
        with pytest.raises(_wire.NotPlain, match=reason.replace("(", r"\(").replace(")", r"\)")):
            _wire.encode(value)


@pytest.mark.parametrize(
    "line",
    [
        b'["ok", [1]]',  # no newline: cut off
        b"not json\n",
        b'["ok", 1] ["ok", 2]\n',
        b"[" * 100_000 + b"\n",
    ],
)
def test_garbled_lines_are_refused(line: bytes) -> None:
    with pytest.raises(_wire.Garbled):
        _wire.loads(line)


@pytest.mark.parametrize(
    "tokens",
    [
        5,
        [1, 2],
        [["l", 3]],
        [["l", -1]],
        [["l", True]],
        [1, ["s", 1], ["s", 1]],
        [["l", 0], ["d", 1]],
        [["x", 1]],
        [["i", "zz"]],
    ],
)
def test_tokens_no_encoding_gives_are_refused(tokens: Any) -> None:
    with pytest.raises(_wire.Garbled):
        _wire.decode(tokens)


@pytest.mark.parametrize("key_size", [0, 32, 64, 65, 200])
def test_reports_are_signed_as_the_standard_hmac_signs_them(key_size: int) -> None:
    key, message = bytes(range(key_size)), b'{"phase": "done", "tests": []}'
    assert _harness.hmac_sha256(key, message) == hmac.new(key, message, "sha256").hexdigest()
