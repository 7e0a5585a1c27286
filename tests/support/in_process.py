"""A stand-in server's own HTTP handler, served in this process with no socket.

`InProcessTransport` is an httpx transport: each request is written as HTTP/1.1 bytes, handed
to the `FakeModel`'s handler class (the very code behind its loopback server) over an
in-memory connection, and the bytes it writes are read back as the response. A backend built
with it (``transport=InProcessTransport(model)``) runs the same wire code as against the
loopback server, faults included, at the cost of a function call: mode tests run fast.
"""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace
from typing import Any

import httpx

from tests.support.fake_model import FakeModel


class _Connection:
    """What `socketserver.StreamRequestHandler` asks of a socket, over bytes in memory."""

    def __init__(self, request: bytes) -> None:
        self._request = request
        self.written = io.BytesIO()
        self.dropped = False

    def makefile(self, mode: str, buffering: int | None = None) -> io.BytesIO:
        return io.BytesIO(self._request)

    def sendall(self, data: bytes) -> None:
        if not self.dropped:
            self.written.write(data)

    def shutdown(self, how: int) -> None:
        self.dropped = True

    def close(self) -> None: ...

    def settimeout(self, timeout: float | None) -> None: ...

    def setsockopt(self, *option: Any) -> None: ...


class InProcessTransport(httpx.AsyncBaseTransport):
    """Answers every request with ``model``'s handler, in a worker thread of this process."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        head = [f"{request.method} {request.url.raw_path.decode()} HTTP/1.1"]
        head += [f"{k}: {v}" for k, v in request.headers.items()]
        if body and "content-length" not in request.headers:
            head.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        written, dropped = await asyncio.to_thread(self._serve, raw)
        return _response(written, dropped, request)

    def _serve(self, raw: bytes) -> tuple[bytes, bool]:
        connection = _Connection(raw)
        server: Any = SimpleNamespace(fake=self.model)
        self.model.handler(connection, ("127.0.0.1", 0), server)  # type: ignore[arg-type]
        return connection.written.getvalue(), connection.dropped


def _response(written: bytes, dropped: bool, request: httpx.Request) -> httpx.Response:
    head, sep, rest = written.partition(b"\r\n\r\n")
    if not sep:
        raise httpx.RemoteProtocolError("the server closed the connection", request=request)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = [tuple(h.split(": ", 1)) for h in header_lines if ": " in h]
    names = {k.lower(): v for k, v in headers}
    if names.get("transfer-encoding") == "chunked":
        content, complete = _unchunk(rest)
    else:
        length = int(names.get("content-length", len(rest)))
        content, complete = rest[:length], len(rest) >= length
    if dropped or not complete:
        raise httpx.RemoteProtocolError("peer closed connection mid-response", request=request)
    kept = [(k, v) for k, v in headers if k.lower() not in ("transfer-encoding", "content-length")]
    return httpx.Response(
        int(status_line.split()[1]), headers=kept, stream=httpx.ByteStream(content)
    )


def _unchunk(data: bytes) -> tuple[bytes, bool]:
    """The body of a chunked message, and whether its last chunk arrived."""
    out, at = [], 0
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            return b"".join(out), False
        size = int(data[at:line_end] or b"0", 16)
        if size == 0:
            return b"".join(out), True
        start = line_end + 2
        out.append(data[start : start + size])
        at = start + size + 2
