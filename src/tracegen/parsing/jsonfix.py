"""Repair the JSON models write, and undo string escapes once."""

from __future__ import annotations

import re

_STRING_EVENT = re.compile(r"[\\\"'\x00-\x1f]")
_JSON_ESCAPES = frozenset('"\\/bfnrt')
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_WORD = re.compile(r"[A-Za-z_]\w*")
_WORDS = {
    "true": "true",
    "false": "false",
    "null": "null",
    "True": "true",
    "False": "false",
    "None": "null",
}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"[\s:]+")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "/": "/"}


def _string(text: str, i: int) -> tuple[str, int] | None:
    """The string opening at ``i`` as a JSON literal and the index past it; None if unended."""
    quote = text[i]
    delim = quote * 3 if text.startswith(quote * 3, i) else quote
    i += len(delim)
    out = ['"']
    n = len(text)
    while (m := _STRING_EVENT.search(text, i)) is not None:
        out.append(text[i : m.start()])
        i, c = m.start(), m.group()
        if text.startswith(delim, i):
            out.append('"')
            return "".join(out), i + len(delim)
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in _JSON_ESCAPES:
                out.append(c + nxt)
            elif nxt == "u" and _HEX4.match(text, i + 2):
                out.append("\\u")
            elif nxt == "'":
                out.append("'")
            else:
                out.append("\\\\")
                i += 1
                continue
            i += 2
            continue
        if c == '"':
            out.append('\\"')
        elif c == "'":
            out.append("'")
        else:
            out.append(_CONTROL.get(c) or f"\\u{ord(c):04x}")
        i += 1
    return None


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and not out[j].strip():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def relaxed_json(text: str) -> str | None:
    """``text`` rewritten as strict JSON, or None when it cannot be repaired safely.

    Raw control characters inside strings are escaped; an invalid escape (``\\d``) keeps
    its backslash; single- and triple-quoted strings become JSON strings; ``True``,
    ``False`` and ``None`` become JSON; trailing commas are dropped; missing closing
    brackets are added at the end and unmatched ones dropped; text after the first
    complete object is ignored. A string that never ends is not repaired: that is a
    truncated call, not a broken one.
    """
    out: list[str] = []
    closers: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            read = _string(text, i)
            if read is None:
                return None
            out.append(read[0])
            i = read[1]
            continue
        if c in "{[":
            closers.append("}" if c == "{" else "]")
            out.append(c)
        elif c in "}]":
            if c in closers:
                while True:
                    _drop_trailing_comma(out)
                    closer = closers.pop()
                    out.append(closer)
                    if closer == c:
                        break
                if not closers:
                    return "".join(out)
        elif c == ",":
            out.append(c)
        else:
            m = _WORD.match(text, i) or _NUMBER.match(text, i) or _SPACE.match(text, i)
            if m is None:
                return None
            token = m.group()
            if m.re is _WORD:
                if token not in _WORDS:
                    return None
                token = _WORDS[token]
            out.append(token)
            i = m.end()
            continue
        i += 1
    while closers:
        _drop_trailing_comma(out)
        out.append(closers.pop())
    return "".join(out)


def unescape_once(text: str) -> str:
    """Undo one level of JSON string escapes; unknown escapes (and ``\\b``, ``\\f``) stay."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if len(e) == 5:
            return chr(int(e[1:], 16))
        return _UNESCAPED.get(e, m.group(0))

    return _ESCAPE.sub(one, text)


_PY_EVENT = re.compile(r"\\[nt]|'''|\"\"\"|['\"#\n]|\\.", re.DOTALL)
_BREAKS = {"\\n": "\n", "\\t": "\t"}


def _has_bare_double_quote(code: str) -> bool:
    return re.search(r'(?<!\\)(?:\\\\)*"', code) is not None


def break_escaped_lines(code: str) -> str:
    """Undo double escaping in code: ``\\n`` and ``\\t`` become a line break and a tab.

    When every double quote is escaped too (``print(\\"x\\")``), the whole code was
    escaped twice and one level is undone everywhere. Otherwise only where a line break
    is legal Python: outside string literals and inside triple-quoted ones, so
    ``"a\\nb"`` stays.
    """
    if not _has_bare_double_quote(code):
        return unescape_once(code)
    out: list[str] = []
    quote: str | None = None
    comment = False
    pos = 0
    for m in _PY_EVENT.finditer(code):
        token = m.group()
        out.append(code[pos : m.start()])
        pos = m.end()
        if token in _BREAKS and (quote is None or len(quote) == 3):
            comment = comment and token != "\\n"
            out.append(_BREAKS[token])
            continue
        out.append(token)
        if comment:
            comment = token != "\n"
        elif quote is None:
            if token == "#":
                comment = True
            elif token[0] in "'\"":
                quote = token
        elif token == quote or (token == "\n" and len(quote) == 1):
            quote = None
    out.append(code[pos:])
    return "".join(out)
