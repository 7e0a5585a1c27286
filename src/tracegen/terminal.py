"""Text tracegen did not write, made safe to print: the one sanitiser for the terminal.

Model text, program output, server replies and problem files can hold bytes a terminal acts
on: an escape sequence that sets the clipboard (OSC 52), a hyperlink (OSC 8), moves the cursor
and erases a line, a C1 control (U+009B is a CSI on its own), or a bidirectional override that
reorders what the reader sees. `printable` shows every C0 control but newline and tab, DEL, every
C1 control and the bidirectional controls as visible escapes (``\\x1b``, ``\\u202e``);
`untrusted` makes a `rich.text.Text` of it (never markup, so ``[/]`` or ``[link=…]`` is shown as
written); `console` is a Rich console that passes everything it writes through `printable`, so
a renderer that forgets (a code block, a panel title) still prints nothing raw; `json_bytes`
escapes the same characters in JSON written to stdout (``\\u001b``), losslessly.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""The bidirectional controls: marks, embeddings, overrides and isolates."""
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}]")
_UNSAFE_JSON = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)
"""The UTF-8 bytes of DEL, C1 and bidirectional controls; in JSON they occur only inside
strings (JSON encoders already escape C0 controls)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control and bidirectional characters shown as escapes; newline and tab
    kept."""
    return _UNSAFE.sub(_escape, text)


def one_line(text: str, limit: int = 500) -> str:
    """``text`` for a one-line message: `printable`, newlines and tabs shown as escapes too,
    at most ``limit`` characters."""
    text = printable(text).replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more)"


def untrusted(text: str, style: str = "") -> Text:
    """A cell or paragraph of text tracegen did not write: `printable`, never markup."""
    from rich.text import Text

    return Text(printable(text), style=style)


@cache
def _table_class() -> type[Table]:
    from rich.table import Table

    class TextTable(Table):
        """A table whose string cells are shown as text, never markup (`untrusted`)."""

        def add_row(self, *cells: Any, **options: Any) -> None:
            shown = (untrusted(c) if isinstance(c, str) else c for c in cells)
            super().add_row(*shown, **options)

    return TextTable


def text_table(*, title: str | Text | None = None, **options: Any) -> Table:
    """The one way a command draws a table (`rich.table.Table`'s options): its title and
    string cells are shown as text (`untrusted`: escaped, never markup); a cell that is
    already a `Text` keeps its styles."""
    shown = untrusted(title) if isinstance(title, str) else title
    return _table_class()(title=shown, **options)


def json_bytes(data: bytes) -> bytes:
    """JSON ``data`` with DEL, C1 and bidirectional characters written as ``\\uXXXX``: the
    same JSON to a parser, nothing a terminal acts on."""
    return _UNSAFE_JSON.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


@cache
def _console_class() -> type[Console]:
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        """Every segment of text printed goes through `printable`; Rich's own control
        segments (cursor moves of a live display) are left as they are."""

        def _render_buffer(self, buffer: Any) -> str:
            return super()._render_buffer(
                segment if segment.control else Segment(printable(segment.text), *segment[1:])
                for segment in buffer
            )

    return SafeConsole


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A Rich console (stdout, or stderr) that prints no control or bidirectional character
    raw; ``options`` are `rich.console.Console`'s."""
    return _console_class()(stderr=stderr, **options)
