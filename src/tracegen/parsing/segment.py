"""Turn model text into typed steps, and cut what only the system may write.

- A tag opens a block of its kind; an unclosed block runs to the end of the text.
- Text outside every block becomes a ``text`` step; whitespace-only text is dropped.
- Prose blocks (``think``, ``verify``, ``plan``, ``reflection``, ``answer``) may hold
  other blocks: ``<think>a<code>x</code>b</think>`` gives think, code, think. A prose tag
  reopened inside itself is part of the outer block, its tags dropped:
  ``<think>a <think>b</think> c</think>`` is one ``think`` step ``a b c``.
- A closing tag closes the innermost open block of its kind and the blocks opened inside
  it; a closing tag with no open block is dropped.
- ``code``, ``tool_call``, ``tool_response``, ``result`` and ``error`` blocks are literal:
  no tag inside them is read (see `tracegen.parsing.blocks` for where they end).
- A markdown fence (a line ```` ``` ```` with no language, ``python``, ``py`` or
  ``python3``) outside literal blocks is a ``code`` step without its fence lines (an
  unclosed one ends at a line that starts with a tag); so is a fence of C++ (``cpp``,
  ``c++``, ``cc``, ``cxx``) or Java (``java``), the step's ``language`` saying which; a fence
  of another language stays text. Fence lines that open or close a ``<code>`` block's
  content are removed too (a C++ or Java one names the step's ``language``).
- Code keeps its indentation exactly; only a first and a last line holding nothing but
  whitespace are removed. Other steps are stripped of surrounding whitespace.
- Every step has ``source="model"``: the caller knows which text the system wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracegen.parsing.blocks import LITERAL_KINDS, SYSTEM_KINDS, TAG, block_end
from tracegen.schema import Language, Step

_CODE_LANGS = frozenset({"", "python", "py", "python3"})
FENCE_LANGUAGES: dict[str, Language] = {
    "cpp": "cpp",
    "c++": "cpp",
    "cc": "cpp",
    "cxx": "cpp",
    "java": "java",
}
"""Fences of the compiled languages a program may be written in, by the name they give."""
_EVENT = re.compile(
    TAG.pattern + r"|(?P<fence>^[ \t]*```[ \t]*(?P<lang>[\w+.-]*)[ \t]*(?:\r?\n|\Z))",
    re.MULTILINE,
)
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_CODE_FENCE_END = re.compile(
    r"^[ \t]*(?:(?P<fence>```)[ \t]*$|(?=" + TAG.pattern + "))", re.MULTILINE
)
_FENCE_LINE = re.compile(r"[ \t]*```[\w+.-]*[ \t]*\r?")
_FIRST_BLANK_LINE = re.compile(r"\A[ \t]*\r?\n")
_LAST_BLANK_LINE = re.compile(r"\r?\n[ \t]*\Z")


@dataclass
class _Piece:
    kind: str
    start: int
    text: str
    fenced: bool = False
    language: Language | None = None


class _Scanner:
    """One pass over the text, keeping a stack of open prose blocks with their depth."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[_Piece] = []
        self.open_kinds: list[str] = []
        self.depths: list[int] = []
        self.buf: list[str] = []
        self.buf_start = 0
        self.open_literal: str | None = None

    def run(self) -> list[_Piece]:
        text, pos = self.text, 0
        while (m := _EVENT.search(text, pos)) is not None:
            self.buf.append(text[pos : m.start()])
            if m.group("fence") is not None:
                pos = self._fence(m)
            elif m.group(1):
                pos = self._close(m)
            else:
                pos = self._open(m)
        self.buf.append(text[pos:])
        self._flush(len(text))
        return self.pieces

    def _flush(self, next_start: int) -> None:
        content = "".join(self.buf)
        if content.strip():
            kind = self.open_kinds[-1] if self.open_kinds else "text"
            self.pieces.append(_Piece(kind, self.buf_start, content))
        self.buf = []
        self.buf_start = next_start

    def _open(self, m: re.Match[str]) -> int:
        name = m.group(2)
        if name in LITERAL_KINDS:
            self._flush(m.start())
            end = block_end(self.text, m.end(), name)
            if not end.closed and end.end == len(self.text):
                self.open_literal = name
            self.pieces.append(_Piece(name, m.start(), self.text[m.end() : end.body_end]))
            self.buf_start = end.end
            return end.end
        if self.open_kinds and self.open_kinds[-1] == name:
            self.depths[-1] += 1
        else:
            self._flush(m.end())
            self.open_kinds.append(name)
            self.depths.append(1)
        return m.end()

    def _close(self, m: re.Match[str]) -> int:
        name = m.group(2)
        if name not in self.open_kinds:
            return m.end()
        if self.open_kinds[-1] == name and self.depths[-1] > 1:
            self.depths[-1] -= 1
            return m.end()
        self._flush(m.end())
        while self.open_kinds.pop() != name:
            self.depths.pop()
        self.depths.pop()
        return m.end()

    def _fence(self, m: re.Match[str]) -> int:
        lang = m.group("lang").lower()
        language = FENCE_LANGUAGES.get(lang)
        is_code = lang in _CODE_LANGS or language is not None
        close = (_CODE_FENCE_END if is_code else _FENCE_CLOSE).search(self.text, m.end())
        body_end = close.start() if close else len(self.text)
        end = close.end() if close else len(self.text)
        if not is_code:
            self.buf.append(self.text[m.start() : end])
            return end
        self._flush(m.start())
        body = self.text[m.end() : body_end]
        self.pieces.append(_Piece("code", m.start(), body, fenced=True, language=language))
        self.buf_start = end
        return end


def _without_fences(code: str) -> str:
    lines = code.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if filled and _FENCE_LINE.fullmatch(lines[filled[0]]):
        lines = lines[filled[0] + 1 :]
        filled = [i for i, line in enumerate(lines) if line.strip()]
    if filled and lines[filled[-1]].strip() == "```":
        lines = lines[: filled[-1]]
    return "\n".join(lines)


def fence_language(body: str) -> Language | None:
    """The language a ``<code>`` block's opening fence names (C++ or Java), if any."""
    first = next((line for line in body.split("\n") if line.strip()), "")
    if not _FENCE_LINE.fullmatch(first):
        return None
    return FENCE_LANGUAGES.get(first.strip().strip("`").strip().lower())


def code_text(body: str) -> str:
    """The code in a ``<code>`` block's content: fences and one blank first/last line off."""
    body = _without_fences(body)
    body = _FIRST_BLANK_LINE.sub("", body, count=1)
    return _LAST_BLANK_LINE.sub("", body, count=1)


def segment(text: str) -> list[Step]:
    """The typed steps of ``text``, in order; empty blocks give no step."""
    steps: list[Step] = []
    for piece in _Scanner(text).run():
        content = code_text(piece.text) if piece.kind == "code" else piece.text.strip()
        if content.strip():
            step = Step(kind=piece.kind, text=content)  # type: ignore[arg-type]
            if piece.kind == "code":
                step.language = piece.language or fence_language(piece.text)
            steps.append(step)
    return steps


def open_blocks(text: str) -> list[str]:
    """The kinds of the blocks still open at the end of ``text``, outermost first (tags
    inside literal blocks do not count)."""
    scanner = _Scanner(text)
    scanner.run()
    literal = [scanner.open_literal] if scanner.open_literal else []
    return scanner.open_kinds + literal


def strip_system_tags(text: str) -> tuple[str, int]:
    """Cut ``text`` at the first block only the system may write; return it and the count.

    ``<result>``, ``<error>`` and ``<tool_response>`` count only where a tag is read, so
    ``print("<result>")`` inside code is kept. Everything from the first such opening tag
    to the end is removed; the count is how many such blocks were in the removed part.
    """
    system = [p for p in _Scanner(text).run() if p.kind in SYSTEM_KINDS]
    if not system:
        return text, 0
    return text[: system[0].start], len(system)
