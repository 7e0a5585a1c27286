"""Text a terminal acts on: escape sequences, C1 controls, DEL, bidirectional controls and
Rich markup, as a hostile model, server or problem file would write them."""

from __future__ import annotations

import re

CLIPBOARD = "\x1b]52;c;UFdORUQtQ0xJUA==\x07"
"""OSC 52: sets the terminal's clipboard to ``PWNED-CLIP``."""
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
"""OSC 8: a hyperlink to an outside site."""
FORGE = "\x1b[1A\x1b[2K\r✓ all tests passed"
"""Cursor up, erase the line: overwrites what tracegen printed above."""
C1 = "\x9b31m\x85\x90\x9d"
"""CSI as one C1 character, NEL, DCS, OSC."""
BIDI = "\u202etxt.exe\u202c \u2066iso\u2069 \u202a\u202b\u202d"
MARKUP = "[link=https://evil.example]L[/link] [bold red]R[/] [/]"
HOSTILE = f"{CLIPBOARD}{LINK}{FORGE}{C1}\x7f\x08{BIDI} {MARKUP}"
"""Everything at once; usable as a name, with no newline."""
RAW = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)
"""The bytes of every control and bidirectional character but newline and tab."""
