"""The wire under the server backends: one request in, its whole answer out, over one
kept-alive connection per in-flight request, at a cost that neither grows with the number
of connections nor with layers between a request and its socket.

httpx's pool (httpcore 1.0) scans every connection it holds, some checks quadratically,
each time a request starts or ends, and each request passes through httpx's client
(URL merging, cookies, auth and redirect hooks), httpcore, h11 and anyio on its way to the
socket: with a hundred requests in flight that costs more CPU than the request itself.
`Lanes` keeps a free list of connections of its own, so taking one is O(1) however many are
in flight; a `_Connection` is an `asyncio.Protocol` that writes the request in one call and
parses the answer as its bytes arrive (``Content-Length``, chunked, or until the server
closes). Plain HTTP and TLS (``https``, the CA store loaded only then) are both direct.

Proxies come from the environment as httpx would take them (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``): a host reached through one is served by
httpx's client and transport (`HttpxWire`), which speak to proxies (``CONNECT`` tunnels,
proxy credentials); so is any httpx transport given in place of the network (tests serve
the stand-in servers in process that way). Faults are httpx's exceptions either way.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.request
from typing import NamedTuple, Protocol, cast
from urllib.parse import unquote, urlsplit

import httpx

_HEAD_LIMIT = 1 << 16
"""An answer whose status line and headers run longer than this is refused as malformed."""
_CLOSE = -1
"""The body runs until the server closes the connection (no length, not chunked)."""
_CHUNKED = -2


class Answer(NamedTuple):
    """A whole HTTP answer."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), None when the answer has none."""
        key = name.lower().encode()
        for field, value in self.headers:
            if field.lower() == key:
                return value.decode("latin-1")
        return None


class Wire(Protocol):
    """Where a backend sends requests: faults are httpx's `httpx.TransportError`s."""

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> Answer:
        """``path`` (below the server's URL) asked with ``headers`` beside the wire's own,
        answered whole."""
        ...

    async def aclose(self) -> None: ...


def wire_for(
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Wire:
    """The wire to the server at ``url``: `Lanes`, or httpx's client through a proxy or the
    given ``transport``. ``headers`` go with every request; answers may take ``timeout_s``
    of silence, connecting at most 10 s of it. A URL that cannot be read is a `ValueError`."""
    connect_s = min(timeout_s, 10.0)
    proxy = _environment_proxy(url) if transport is None else None
    if transport is None and proxy is None:
        return Lanes(url, headers, connect_s=connect_s, read_s=timeout_s)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = httpx.AsyncClient(
        base_url=url,
        headers=headers,
        transport=transport or httpx.AsyncHTTPTransport(proxy=proxy, limits=limits),
        timeout=httpx.Timeout(timeout_s, connect=connect_s),
    )
    return HttpxWire(client)


class HttpxWire:
    """A `Wire` over an httpx client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> Answer:
        request = self._client.build_request(method, path, content=body, headers=headers)
        response = await self._client.send(request, stream=True)
        try:
            raw = await response.aread()
        except httpx.RemoteProtocolError as e:  # as `Lanes`: once the answer has begun
            raise httpx.ReadError(str(e)) from None
        finally:
            await response.aclose()
        return Answer(response.status_code, response.headers.raw, raw)

    async def aclose(self) -> None:
        await self._client.aclose()


class Lanes:
    """A `Wire`: a free list of kept-alive connections to the one server at ``url``."""

    def __init__(
        self, url: str, headers: dict[str, str], *, connect_s: float, read_s: float
    ) -> None:
        parts = urlsplit(url)
        self._tls = parts.scheme == "https"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// URL with a host")
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/").encode()
        fields = {
            "Host": parts.netloc.rpartition("@")[2],
            "Accept": "*/*",
            "User-Agent": "tracegen",
        }
        if parts.username or parts.password:  # as httpx: credentials in the URL are Basic auth
            secret = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            headers = {
                **headers,
                "Authorization": "Basic " + base64.b64encode(secret.encode()).decode(),
            }
        fields.update(headers)
        self._fields = "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode()
        self._connect_s, self._read_s = connect_s, read_s
        # Loading the CA store costs ~70 ms: only where TLS happens, once for every lane.
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if self._tls else None
        self._idle: list[_Connection] = []
        self._opened = 0

    @property
    def size(self) -> int:
        """How many connections were opened so far."""
        return self._opened

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> Answer:
        head = [b"%s %s%s HTTP/1.1\r\n" % (method.encode(), self._prefix, path.encode())]
        head.append(self._fields)
        head += [f"{k}: {v}\r\n".encode() for k, v in headers.items()]
        if body is not None:
            head.append(b"Content-Length: %d\r\n" % len(body))
        head.append(b"\r\n")
        if body:
            head.append(body)
        connection = self._take() or await self._open()
        try:
            answer, reusable = await connection.exchange(b"".join(head), self._read_s)
        except BaseException:
            connection.close()
            raise
        if reusable:
            self._idle.append(connection)
        else:
            connection.close()
        return answer

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

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        connecting = loop.create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._tls else None,
        )
        try:
            _, connection = await asyncio.wait_for(connecting, self._connect_s)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {self._host}:{self._port}") from None
        except (OSError, ssl.SSLError) as e:
            raise httpx.ConnectError(f"{self._host}:{self._port}: {e}") from None
        self._opened += 1
        return connection


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, written whole, its answer parsed as
    its bytes arrive. Faults are httpx's exceptions, as httpx's own transport raises them:
    closed before any byte of the answer `httpx.RemoteProtocolError`, closed or garbled
    within it `httpx.ReadError`, silent for the read timeout `httpx.ReadTimeout`."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self.open = False
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[Answer, bool]] | None = None
        self._head: tuple[int, list[tuple[bytes, bytes]], int, bool] | None = None
        self._body = bytearray()
        self._chunk = 0  # chunked: the size of the chunk whose data is awaited
        self._received = False
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    # ------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (Ray runs async actors on uvloop) are not asyncio.Transport
        # subclasses, though they do all it does
        self._transport = cast(asyncio.Transport, transport)
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

    async def exchange(self, data: bytes, timeout: float) -> tuple[Answer, bool]:
        """Write ``data`` (a whole request) and wait for its whole answer, and whether the
        connection can take another request."""
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        self._answer = answer = loop.create_future()
        self._head, self._received, self._chunk = None, False, 0
        self._body.clear()
        self._buffer.clear()
        self._transport.write(data)
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
        self._answer.set_result((Answer(self._head[0], self._head[1], body), reusable))

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
