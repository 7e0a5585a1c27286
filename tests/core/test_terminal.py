"""`tracegen.terminal`, the one sanitiser for text tracegen did not write."""

from __future__ import annotations

import orjson

from tests.support.hostile_text import BIDI, HOSTILE, RAW
from tracegen.terminal import json_bytes, one_line, printable


def test_printable_shows_every_control_and_bidi_character_and_keeps_the_rest() -> None:
    hostile = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)])) + BIDI
    shown = printable(hostile + "é✓ [b]")
    assert shown.endswith("é✓ [b]")
    assert "\n" in shown and "\t" in shown
    assert not RAW.search(shown.replace("\n", "").replace("\t", "").encode())
    assert "\\x1b" in shown and "\\x9b" in shown and "\\u202e" in shown and "\\u2069" in shown
    assert "\n" not in one_line("a\nb") and len(one_line("x" * 10_000)) < 600


def test_json_bytes_escapes_c1_and_bidi_and_loses_nothing() -> None:
    value = {"id": HOSTILE + "\u2028é"}
    data = json_bytes(orjson.dumps(value))
    assert not RAW.search(data)
    assert orjson.loads(data) == value
