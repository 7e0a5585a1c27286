"""Plain data between processes that do not trust each other. Standard library only.

The candidate's process and the judge's exchange values as JSON lines. A value travels as
a flat list of tokens in postfix order: scalars stand for themselves and ``["t", 2]``
makes a tuple of the two values before it, so tuples, sets, bytes, dicts with any plain
keys and lists nested thousands deep arrive as themselves, and neither side recurses.
Only exact built-in types cross: an ``int`` subclass, an object with its own ``__eq__``,
a function, a generator or a list that contains itself is refused with the reason.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
import math
import reprlib
from typing import Any

MAX_ITEMS = 2_000_000
MESSAGE_LIMIT = 16 << 20
REPR_LIMIT = 500
PLAIN_TYPES = "None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset"
MAX_DEPTH = 100
"""`to_plain` (the JSON-like values of ``io`` tests) stops at this depth."""

_SCALARS = (bool, int, float, str)
_SMALL_INT = 1 << 63
_CONTAINERS: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "f", dict: "d"}
_BUILD: dict[str, type] = {"l": list, "t": tuple, "s": set, "f": frozenset}


class NotPlain(Exception):
    """A value that cannot cross as plain data; the message says what it was."""


class Garbled(Exception):
    """A message that is not a well-formed value."""


def describe(value: Any) -> str:
    """``"a generator"``, ``"Yes (a subclass of int)"``: what a refused value is, in words."""
    kind = type(value)
    name = getattr(kind, "__name__", "object")
    for base in (*_SCALARS, list, tuple, dict, set, frozenset, bytes, complex):
        if kind is not base and isinstance(value, base):
            return f"{name} (a subclass of {base.__name__})"
    if callable(value):
        return f"a callable {name}"
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


_FLAT = {type(None), bool, int, float, str}


def _scalars(members: Any) -> bool:
    """Whether ``members`` holds only ``None``, bools, floats, strs and ints below 2**63."""
    kinds = set(map(type, members))
    if not kinds <= _FLAT:
        return False
    if int in kinds:
        ints = members if len(kinds) == 1 else [m for m in members if type(m) is int]
        return min(ints) > -_SMALL_INT and max(ints) < _SMALL_INT
    return True


def encode(value: Any) -> list[Any]:
    """``value`` as a flat list of JSON-ready tokens; `NotPlain` if it is not plain data."""
    out: list[Any] = []
    append = out.append
    stack: list[tuple[Any, Any]] = [(iter((value,)), None)]  # (members left, their container)
    open_ids: set[int] = set()
    items = 0
    while stack:
        members, container = stack[-1]
        for item in members:
            items += 1
            kind = type(item)
            if kind is str or kind is float or kind is bool or item is None:
                append(item)
            elif kind is int:
                append(item if -_SMALL_INT < item < _SMALL_INT else ["i", format(item, "x")])
            elif kind in _CONTAINERS:
                if kind is not dict and len(item) > 8 and _scalars(item):
                    items += len(item)  # a flat run of small scalars: no need to visit each
                    out.extend(item)
                    append([_CONTAINERS[kind], len(item)])
                    continue
                if id(item) in open_ids:
                    raise NotPlain(f"a {kind.__name__} that contains itself")
                open_ids.add(id(item))
                inner = (x for pair in item.items() for x in pair) if kind is dict else item
                stack.append((iter(inner), item))
                break
            elif kind is bytes:
                append(["b", item.hex()])
            elif kind is complex:
                append(["c", item.real, item.imag])
            else:
                raise NotPlain(describe(item))
        else:
            stack.pop()
            if container is not None:
                open_ids.discard(id(container))
                append([_CONTAINERS[type(container)], len(container)])
        if items > MAX_ITEMS:
            raise NotPlain(f"a value of more than {MAX_ITEMS:,} items")
    return out


def decode(tokens: Any) -> Any:
    """The value `encode` gave ``tokens`` for; `Garbled` for anything it cannot have given."""
    if type(tokens) is not list:
        raise Garbled("not an encoded value")
    stack: list[Any] = []
    try:
        for token in tokens:
            kind = type(token)
            if token is None or kind in _SCALARS:
                stack.append(token)
                continue
            if kind is not list or len(token) < 2 or type(token[0]) is not str:
                raise Garbled("not a token")
            tag, arg = token[0], token[1]
            if tag in _BUILD or tag == "d":
                width = arg * 2 if tag == "d" else arg
                if type(arg) is not int or not 0 <= width <= len(stack):
                    raise Garbled("a container of values that are not there")
                members = stack[len(stack) - width :]
                del stack[len(stack) - width :]
                if tag == "d":
                    stack.append(dict(zip(members[0::2], members[1::2], strict=True)))
                else:
                    stack.append(_BUILD[tag](members))
            elif tag in ("i", "b") and len(token) == 2 and type(arg) is str:
                stack.append(int(arg, 16) if tag == "i" else bytes.fromhex(arg))
            elif tag == "c" and len(token) == 3 and all(type(x) in (int, float) for x in token[1:]):
                stack.append(complex(token[1], token[2]))
            else:
                raise Garbled(f"unknown token {tag[:20]!r}")
    except (TypeError, ValueError) as e:  # unhashable keys or members, bad hex
        raise Garbled(str(e)) from None
    if len(stack) != 1:
        raise Garbled("not one value")
    return stack[0]


def _unencodable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


# The C encoder and scanner, made once: a forked process calling them runs no Python-level
# json code (each page of the parent it touches costs a copy).
_encoder = getattr(json.encoder, "c_make_encoder", None)  # None without the C accelerator
_ENCODE = (
    _encoder(
        None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    if _encoder is not None
    else None
)
_SCAN: Any = vars(json.decoder.JSONDecoder())["scan_once"]


def dumps(message: Any) -> bytes:
    """One message as a line of ASCII JSON (every newline inside strings is escaped)."""
    if _ENCODE is None:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"
    return "".join(_ENCODE(message, 0)).encode() + b"\n"


def parse(document: bytes) -> Any:
    """A whole JSON document (UTF-8), parsed by the C scanner alone."""
    text = document.decode()
    value, end = _SCAN(text, 0)
    if text[end:].strip():
        raise ValueError("trailing data after the JSON value")
    return value


def loads(line: bytes) -> Any:
    """The message of one line; `Garbled` if it is not JSON or is too long."""
    if len(line) > MESSAGE_LIMIT or not line.endswith(b"\n"):
        raise Garbled("a message that is cut off or longer than the limit")
    text = line[:-1].decode("ascii", "replace")
    try:
        value, end = _SCAN(text, 0)
    except (ValueError, StopIteration, RecursionError) as e:
        raise Garbled(f"not JSON ({type(e).__name__})") from None
    if end != len(text):
        raise Garbled("more than one JSON value on a line")
    return value


# ------------------------------------------------------------------ comparing values


def to_plain(value: Any, depth: int = 0) -> tuple[bool, Any]:
    """``(True, json_value)`` for JSON-like data (tuples become lists); ``(False, None)``.

    Exact types only, so an object that overrides ``__eq__`` never passes as an expected value.
    """
    kind = type(value)
    if value is None or kind in _SCALARS:
        return True, value
    if depth > MAX_DEPTH:
        return False, None
    if kind in (list, tuple):
        out = []
        for item in value:
            ok, plain = to_plain(item, depth + 1)
            if not ok:
                return False, None
            out.append(plain)
        return True, out
    if kind is dict:
        result = {}
        for key, item in value.items():
            ok, plain = to_plain(item, depth + 1)
            if type(key) is not str or not ok:
                return False, None
            result[key] = plain
        return True, result
    return False, None


FLOAT_REL_TOL = 1e-6
"""An ``io`` test's float ``expected`` passes for a number within this relative tolerance..."""
FLOAT_ABS_TOL = 1e-9
"""...or this absolute one (for answers near zero)."""


def values_equal(actual: Any, expected: Any) -> bool:
    """Equality of JSON values, on exact built-in types only.

    An ``int`` expected needs a number exactly equal to it (``10.0`` passes for ``10``,
    ``10000005.0`` does not for ``10000000``); a ``float`` expected, an ``int`` or ``float``
    within `FLOAT_REL_TOL` (or `FLOAT_ABS_TOL`); NaN equals only NaN, an infinity only
    itself; bools equal only bools, strings only strings, lists and dicts item by item.
    """
    kind, want = type(actual), type(expected)
    if kind is bool or want is bool:
        return kind is want and actual == expected
    if want is int:
        return (kind is int or kind is float) and actual == expected
    if want is float:
        if kind is int:
            try:
                actual = float(actual)
            except OverflowError:
                return False
        elif kind is not float:
            return False
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        return math.isclose(actual, expected, rel_tol=FLOAT_REL_TOL, abs_tol=FLOAT_ABS_TOL)
    if kind is list and want is list:
        return len(actual) == len(expected) and all(
            values_equal(a, e) for a, e in zip(actual, expected, strict=True)
        )
    if kind is dict and want is dict:
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k]) for k in actual
        )
    return (kind is str or actual is None) and kind is want and actual == expected


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = REPR_LIMIT
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 40
_repr.maxlevel = 6


def short_repr(value: Any) -> str:
    try:
        text = _repr.repr(value)
    except BaseException as e:  # a user __repr__ may raise anything
        text = f"<unrepresentable {type(value).__name__}: {type(e).__name__}>"
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 1] + "…"
