"""Misbehaviours at the HTTP level, for the loopback stand-ins: a ``Fault("wire", message=NAME)``
makes the server send, in place of its answer's bytes, what `WIRE_FAULTS` names.

Each is a way real servers and proxies have been seen to fail, or a framing RFC 9112 forbids
(§6.3 message body length, §7.1 chunked coding, §2.2 bare LF, §5.1 no space before the colon;
RFC 9110 §15 a status is three digits): a body without end or past any sensible size, bytes
dripped slower than any deadline, broken framing, an answer in a format not asked for, token
ids outside any vocabulary, an answer sent twice. The answer the server meant to send is
``data`` (a JSON body); what is sent instead is written straight to the socket.
"""

from __future__ import annotations

import contextlib
import gzip
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from tests.support.fake_model import Fault, Handler

JSON_TYPE = b"Content-Type: application/json\r\n"
WireFault = Callable[["Handler", bytes, "Fault"], None]


def _send(handler: Handler, raw: bytes) -> None:
    handler.wfile.write(raw)
    handler.wfile.flush()


def _endless(handler: Handler, data: bytes, fault: Fault) -> None:
    """A chunked body that never ends."""
    _send(handler, b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
    while not handler.model.stopping.is_set():
        _send(handler, piece)


def _huge(handler: Handler, data: bytes, fault: Fault) -> None:
    """A body that says it holds 3 GB, and sends them."""
    _send(handler, b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Content-Length: 3000000000\r\n\r\n")
    piece = b" " * 0x10000
    for _ in range(3_000_000_000 // len(piece)):
        if handler.model.stopping.is_set():
            return
        _send(handler, piece)


def _drip(handler: Handler, data: bytes, fault: Fault) -> None:
    """The answer, one byte every ``fault.seconds`` (2 s)."""
    raw = _whole(data)
    for i in range(len(raw)):
        if handler.model.stopping.wait(2.0 if fault.seconds is None else fault.seconds):
            return
        _send(handler, raw[i : i + 1])


def _late(handler: Handler, data: bytes, fault: Fault) -> None:
    """The answer, then 30 ms later the same answer again on the kept-alive connection."""
    _send(handler, _whole(data))
    time.sleep(0.03)
    _send(handler, _whole(data))


def _continue_loop(handler: Handler, data: bytes, fault: Fault) -> None:
    """``100 Continue`` and nothing else, one every ``fault.seconds`` (2 s), forever."""
    while not handler.model.stopping.wait(2.0 if fault.seconds is None else fault.seconds):
        _send(handler, b"HTTP/1.1 100 Continue\r\n\r\n")


def _headers_then_close(handler: Handler, data: bytes, fault: Fault) -> None:
    """The status line and headers of the answer, then the connection closed."""
    _send(handler, b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Content-Length: %d\r\n\r\n" % len(data))
    handler.close_connection = True
    handler.connection.shutdown(2)


def _gzip(handler: Handler, data: bytes, fault: Fault) -> None:
    """The answer gzip-compressed, though ``Accept-Encoding: identity`` was asked for."""
    body = gzip.compress(data)
    head = b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Content-Encoding: gzip\r\n"
    _send(handler, head + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _impossible_ids(handler: Handler, data: bytes, fault: Fault) -> None:
    """The answer with token ids -5 and 10¹² among its own."""
    whole: dict[str, Any] = orjson.loads(data)
    places = [whole, *[c for c in whole.get("choices") or () if isinstance(c, dict)]]
    for place in places:
        for key in ("tokens", "token_ids", "prompt_token_ids"):
            if isinstance(place.get(key), list) and place[key]:
                place[key] = [-5, *place[key][1:-1], 10**12]
    _send(handler, _whole(orjson.dumps(whole)))


def _framed(head: bytes) -> WireFault:
    """The answer under ``head`` (a status line and headers), the body as given."""

    def send(handler: Handler, data: bytes, fault: Fault) -> None:
        _send(handler, head.replace(b"%LEN", b"%d" % len(data)) + data)

    return send


def _event_stream(handler: Handler, data: bytes, fault: Fault) -> None:
    """An event stream (``stream: true``'s format) to a request that asked for one object."""
    body = b"data: " + data + b"\n\ndata: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    _send(handler, head + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _whole(data: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Content-Length: %d\r\n\r\n" % len(data) + data


def _bad_chunk(handler: Handler, data: bytes, fault: Fault) -> None:
    """A chunk without the CRLF after its data."""
    head = b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + b"Transfer-Encoding: chunked\r\n\r\n"
    _send(handler, head + b"%x\r\n" % len(data) + data + b"0\r\n\r\n")


WIRE_FAULTS: dict[str, WireFault] = {
    "endless-chunked": _endless,
    "huge-body": _huge,
    "slow-drip": _drip,
    "continue-loop": _continue_loop,
    "headers-then-close": _headers_then_close,
    "late-answer": _late,
    "gzip": _gzip,
    "impossible-ids": _impossible_ids,
    "event-stream": _event_stream,
    "bad-chunk": _bad_chunk,
    "conflicting-lengths": _framed(
        b"HTTP/1.1 200 OK\r\nContent-Length: %LEN\r\nContent-Length: 2\r\n\r\n"
    ),
    "status-2001": _framed(b"HTTP/1.1 2001 OK\r\nContent-Length: %LEN\r\n\r\n"),
    "http-1.9": _framed(b"HTTP/1.9 200 OK\r\nContent-Length: %LEN\r\n\r\n"),
    "bogus-transfer-encoding": _framed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunkedx\r\n\r\n"),
    "bare-lf": _framed(b"HTTP/1.1 200 OK\nContent-Length: %LEN\n\n"),
}
"""Every misbehaviour by name."""


def misbehave(handler: Handler, data: bytes, fault: Fault) -> None:
    """Send what ``fault.message`` names instead of ``data``; the connection stays open (the
    server reads on, as a real one would), except after a body that has no end."""
    name = fault.message or ""
    try:
        WIRE_FAULTS[name](handler, data, fault)
    except KeyError:
        raise ValueError(f"unknown wire fault {name!r}; known: {', '.join(WIRE_FAULTS)}") from None
    except OSError:  # the client hung up, as it should
        handler.close_connection = True
        return
    if name in ("endless-chunked", "huge-body", "slow-drip", "continue-loop", "headers-then-close"):
        handler.close_connection = True
    with contextlib.suppress(OSError):
        handler.wfile.flush()
