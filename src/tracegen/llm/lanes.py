"""One kept-alive connection per in-flight request, each request written whole and its
answer read whole: an HTTP transport whose cost neither grows with the number of
connections nor with the layers between a request and its socket.

httpx's pool (httpcore 1.0) scans every connection it holds, some checks quadratically,
each time a request starts or ends, and each request passes through httpcore, h11 and anyio
on its way to the socket: with a hundred requests in flight that costs more CPU than the
request itself. `Lanes` keeps a free list of connections of its own, so taking one is O(1)
however many are in flight; a `_Connection` is an `asyncio.Protocol` that writes the
request in one call and parses the answer as its bytes arrive (``Content-Length``, chunked,
or until the server closes). Plain HTTP and TLS (``https``, the CA store loaded only then)
are both direct connections.

Proxies come from the environment as httpx would take them (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``): a host reached through one is served by
httpx's own transport (`transport_for`), which speaks to proxies (``CONNECT`` tunnels,
proxy credentials).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from urllib.parse import urlsplit

import httpx

_HEAD_LIMIT = 1 << 16
"""An answer whose status line and headers run longer than this is refused as malformed."""
_CLOSE = -1
"""The body runs until the server closes the connection (no length, not chunked)."""
_CHUNKED = -2


def transport_for(url: str) -> httpx.AsyncBaseTransport:
    """The transport for the server at ``url``: `Lanes`, or httpx's own through a proxy."""
    proxy = _environment_proxy(url)
    if proxy is None:
        return Lanes(url)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncHTTPTransport(proxy=proxy, limits=limits)


class Lanes(httpx.AsyncBaseTransport):
    """A free list of kept-alive connections to the one server at ``url``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        # Loading the CA store costs ~70 ms: only where TLS happens, once for every lane.
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if self._tls else None
        self._idle: list[_Connection] = []
        self._opened = 0

    @property
    def size(self) -> int:
        """How many connections were opened so far."""
        return self._opened

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        data = _request_bytes(request, await request.aread())
        connection = self._take()
        if connection is None:
            connection = await self._open(timeouts.get("connect"))
        try:
            status, headers, body, reusable = await connection.exchange(data, timeouts.get("read"))
        except BaseException:
            connection.close()
            raise
        if reusable:
            self._idle.append(connection)
        else:
            connection.close()
        return httpx.Response(
            status_code=status,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def _take(self) -> _Connection | None:
        """An idle connection the server has not closed meanwhile, if there is one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.open:
                return connection
        return None

    async def _open(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        connecting = loop.create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._tls else None,
        )
        try:
            _, connection = await asyncio.wait_for(connecting, timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {self._host}:{self._port}") from None
        except (OSError, ssl.SSLError) as e:
            raise httpx.ConnectError(f"{self._host}:{self._port}: {e}") from None
        self._opened += 1
        return connection


def _request_bytes(request: httpx.Request, body: bytes) -> bytes:
    url = request.url
    target = url.raw_path
    lines = [b"%s %s HTTP/1.1" % (request.method.encode(), target)]
    lines += [b"%s: %s" % pair for pair in request.headers.raw]
    if body and "content-length" not in request.headers:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, written whole, its answer parsed as
    its bytes arrive. Faults are httpx's exceptions, as httpx's own transport raises them:
    closed before any byte of the answer `httpx.RemoteProtocolError`, closed or garbled
    within it `httpx.ReadError`, silent for the read timeout `httpx.ReadTimeout`."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self.open = False
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes, bool]] | None
        self._answer = None
        self._head: tuple[int, list[tuple[bytes, bytes]], int, bool] | None = None
        self._body = bytearray()
        self._chunk = 0  # chunked: the size of the chunk whose data is awaited
        self._received = False
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    # ------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.open = True

    def data_received(self, data: bytes) -> None:
        self._received = True
        self._last = asyncio.get_running_loop().time()
        self._buffer += data
        if self._answer is None or self._answer.done():
            self.close()  # bytes nobody asked for: the connection is not reused
            return
        try:
            self._parse()
        except ValueError as e:
            self._fail(httpx.ReadError(f"malformed HTTP answer: {e}"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._answer is None or self._answer.done():
            return
        if self._head is not None and self._head[2] == _CLOSE:
            self._done(bytes(self._buffer), reusable=False)
        elif self._received:
            self._fail(httpx.ReadError("the server closed the connection mid-answer"))
        else:
            self._fail(httpx.RemoteProtocolError("the server closed the connection"))

    # ------------------------------------------------------------ a request

    async def exchange(
        self, data: bytes, timeout: float | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        """Write ``data`` (a whole request) and wait for its whole answer: status, headers,
        body, and whether the connection can take another request."""
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        self._answer = answer = loop.create_future()
        self._head, self._received, self._chunk = None, False, 0
        self._body.clear()
        self._buffer.clear()
        self._transport.write(data)
        if timeout is not None:
            self._last = loop.time()
            self._timer = loop.call_at(self._last + timeout, self._expire, timeout)
        try:
            return await answer
        finally:
            self._answer = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def close(self) -> None:
        self.open = False
        if self._transport is not None:
            self._transport.close()

    def _expire(self, timeout: float) -> None:
        """Bytes keep the request alive: it times out only after ``timeout`` of silence."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._last < timeout:
            self._timer = loop.call_at(self._last + timeout, self._expire, timeout)
            return
        self._fail(httpx.ReadTimeout(f"no answer within {timeout:g}s"))

    def _fail(self, error: Exception) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(error)
        self.close()

    def _done(self, body: bytes, *, reusable: bool) -> None:
        assert self._head is not None and self._answer is not None
        self._answer.set_result((self._head[0], self._head[1], body, reusable))

    # ------------------------------------------------------------ parsing

    def _parse(self) -> None:
        buffer = self._buffer
        while self._head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _HEAD_LIMIT:
                    raise ValueError("headers too long")
                return
            head = _head(bytes(buffer[:end]))
            del buffer[: end + 4]
            if not 100 <= head[0] < 200:  # an interim answer (100 Continue) is skipped
                self._head = head
        length, keep = self._head[2:]
        if length == _CHUNKED:
            self._chunked()
        elif length != _CLOSE and len(buffer) >= length:
            self._done(bytes(buffer[:length]), reusable=keep and len(buffer) == length)

    def _chunked(self) -> None:
        buffer, body = self._buffer, self._body
        while True:
            if self._chunk:  # the current chunk's data, then its CRLF
                if len(buffer) < self._chunk + 2:
                    return
                body += buffer[: self._chunk]
                del buffer[: self._chunk + 2]
                self._chunk = 0
            end = buffer.find(b"\r\n")
            if end < 0:
                return
            size = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
            if size < 0:
                raise ValueError("a negative chunk size")
            if size:
                del buffer[: end + 2]
                self._chunk = size
                continue
            # The last chunk: trailer fields, if any, up to an empty line.
            stop = (
                end + 4
                if buffer.startswith(b"\r\n", end + 2)
                else buffer.find(b"\r\n\r\n", end) + 4
            )
            if stop < 4:
                return
            assert self._head is not None
            self._done(bytes(body), reusable=self._head[3] and len(buffer) == stop)
            return


def _head(raw: bytes) -> tuple[int, list[tuple[bytes, bytes]], int, bool]:
    """Status, headers, body length (or `_CLOSE`, `_CHUNKED`) and keep-alive of an answer."""
    status_line, *lines = raw.split(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    if not version.startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1 status line: {status_line[:40]!r}")
    status = int(rest[:3])
    headers: list[tuple[bytes, bytes]] = []
    length, keep = _CLOSE, version == b"HTTP/1.1"
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon:
            raise ValueError(f"not a header: {line[:40]!r}")
        value = value.strip()
        headers.append((name, value))
        key = name.lower()
        if key == b"content-length" and length != _CHUNKED:
            length = int(value)
            if length < 0:
                raise ValueError("a negative Content-Length")
        elif key == b"transfer-encoding" and b"chunked" in value.lower():
            length = _CHUNKED
        elif key == b"connection":
            tokens = value.lower()
            keep = b"close" not in tokens and (keep or b"keep-alive" in tokens)
    if status in (204, 304):
        length = 0
    return status, headers, length, keep


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, None when there is none or it is
    bypassed (``NO_PROXY``)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy
