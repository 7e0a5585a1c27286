"""The HTTP transport under the server backends: one request in, its whole response out,
bounded in size and time, over kept-alive connections taken in O(1).

httpx's pool (httpcore 1.0) scans every connection it holds, some checks quadratically,
each time a request starts or ends, and each request passes through httpx's client, httpcore,
h11 and anyio on its way to the socket: with a hundred requests in flight that costs more CPU
than the request itself. `DirectTransport` keeps a queue of idle connections of its own, so
taking one is O(1) however many are in flight; a `_Connection` is an `asyncio.Protocol` that
writes the request in one call and hands the response's bytes, as they arrive, to llhttp (the
parser of Node.js and uvicorn, through ``httptools``): tracegen parses no HTTP of its own, and
what the RFC forbids (a chunk without its CRLF, two different ``Content-Length``s, status
``2001``, ``HTTP/1.9``, a bare LF, interim ``1xx`` answers past `MAX_INTERIM`…) is refused
rather than guessed at. Measured against h11
side by side in ``benchmarks/throughput.py --parsers``.

Every response is bounded: its body by ``limit`` bytes while it is read (the bytes past it
are never kept; a gzip body is decoded under the same bound), the whole request by the
deadline (``timeout_s`` from the moment it starts, however the server drips its bytes).
``Accept-Encoding: identity`` is asked for; a ``Content-Encoding`` other than gzip or deflate
is refused. A connection rests `REST_S` before its next request and is checked for bytes nobody
asked for just before: a server that answers one request twice loses the connection instead
of answering the next request with a stale response.

Proxies come from the environment as httpx would take them (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY``, ``NO_PROXY``): a host reached through one is served by httpx's client
(`HttpxTransport`), which speaks to proxies; so is any httpx transport given in place of the
network (tests serve the stand-in servers in process that way). Faults are httpx's exceptions
either way; `MalformedResponse` and `ResponseTooLarge` (httpx ``ReadError``s) carry the first
bytes the server sent.
"""

from __future__ import annotations

import asyncio
import base64
import select
import ssl
import urllib.request
import zlib
from collections import deque
from typing import NamedTuple, Protocol, cast
from urllib.parse import unquote, urlsplit

import httptools
import httpx

HEAD_LIMIT = 1 << 16
"""Status line and headers (trailers included) longer than this are refused as malformed."""
REST_S = 0.1
"""How long a kept-alive connection rests between a response and the next request on it."""
FIRST_BYTES = 64
"""How many of a response's first bytes an error about it shows."""
MAX_INTERIM = 8
"""Interim answers (``100 Continue``, other 1xx) a response may open with; more is malformed."""
_DECODED = (b"gzip", b"x-gzip", b"deflate")


class HttpResponse(NamedTuple):
    """A whole HTTP response; ``body`` decoded (gzip) and at most the request's limit."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes | bytearray

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), None when the response has none."""
        key = name.lower().encode()
        for field, value in self.headers:
            if field.lower() == key:
                return value.decode("latin-1")
        return None


class MalformedResponse(httpx.ReadError):
    """The server sent bytes that are not an HTTP/1.1 response tracegen can read."""

    def __init__(self, message: str, first: bytes) -> None:
        super().__init__(message)
        self.first = first
        """The first bytes of the response."""


class ResponseTooLarge(MalformedResponse):
    """The response's body ran past the request's limit."""


class HttpTransport(Protocol):
    """Where a backend sends requests: faults are httpx's `httpx.TransportError`s."""

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None, limit: int
    ) -> HttpResponse:
        """``path`` (below the server's URL) asked with ``headers`` beside the transport's
        own, answered whole with a body of at most ``limit`` bytes."""
        ...

    async def aclose(self) -> None: ...


def transport_for(
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> HttpTransport:
    """The transport to the server at ``url``: `DirectTransport`, or httpx's client through a
    proxy or the given ``transport``. ``headers`` go with every request; each request may take
    ``timeout_s`` in all, connecting at most 10 s of it. A URL that cannot be read is a
    `ValueError`."""
    connect_s = min(timeout_s, 10.0)
    proxy = _environment_proxy(url) if transport is None else None
    if transport is None and proxy is None:
        return DirectTransport(url, headers, connect_s=connect_s, timeout_s=timeout_s)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = httpx.AsyncClient(
        base_url=url,
        headers={"Accept-Encoding": "identity", **headers},
        transport=transport or httpx.AsyncHTTPTransport(proxy=proxy, limits=limits),
        timeout=httpx.Timeout(timeout_s, connect=connect_s),
    )
    return HttpxTransport(client, timeout_s)


class HttpxTransport:
    """An `HttpTransport` over an httpx client."""

    def __init__(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None, limit: int
    ) -> HttpResponse:
        request = self._client.build_request(method, path, content=body, headers=headers)
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.send(request, stream=True)
                try:
                    raw = bytearray()
                    async for piece in response.aiter_bytes():
                        raw += piece
                        if len(raw) > limit:
                            raise ResponseTooLarge(_too_large(limit), bytes(raw[:FIRST_BYTES]))
                except httpx.RemoteProtocolError as e:  # as `DirectTransport`, once begun
                    raise httpx.ReadError(str(e)) from None
                except httpx.DecodingError as e:
                    raise MalformedResponse(str(e), b"") from None
                finally:
                    await response.aclose()
        except TimeoutError:
            raise httpx.ReadTimeout(f"no whole answer within {self._timeout_s:g}s") from None
        return HttpResponse(response.status_code, response.headers.raw, raw)

    async def aclose(self) -> None:
        await self._client.aclose()


class DirectTransport:
    """An `HttpTransport`: a queue of kept-alive connections to the one server at ``url``."""

    def __init__(
        self, url: str, headers: dict[str, str], *, connect_s: float, timeout_s: float
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
            "Accept-Encoding": "identity",
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
        self._connect_s, self._timeout_s = connect_s, timeout_s
        # Loading the CA store costs ~70 ms: only where TLS happens, once for every connection.
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if self._tls else None
        self._idle: deque[tuple[float, _Connection]] = deque()
        self._opened = 0

    @property
    def size(self) -> int:
        """How many connections were opened so far."""
        return self._opened

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None, limit: int
    ) -> HttpResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        head = [b"%s %s%s HTTP/1.1\r\n" % (method.encode(), self._prefix, path.encode())]
        head.append(self._fields)
        head += [f"{k}: {v}\r\n".encode() for k, v in headers.items()]
        if body is not None:
            head.append(b"Content-Length: %d\r\n" % len(body))
        head.append(b"\r\n")
        if body:
            head.append(body)
        connection = self._take(loop.time()) or await self._open(deadline - loop.time())
        try:
            response, reusable = await connection.exchange(
                b"".join(head), deadline, self._timeout_s, limit
            )
        except BaseException:
            connection.close()
            raise
        if reusable and connection.open:
            self._idle.append((loop.time(), connection))
        else:
            connection.close()
        return response

    async def aclose(self) -> None:
        for _, connection in self._idle:
            connection.close()
        self._idle.clear()

    def _take(self, now: float) -> _Connection | None:
        """The connection idle longest, if it has rested `REST_S`, is still open and has no
        bytes waiting that nobody asked for; else None (a new one is opened)."""
        idle = self._idle
        while idle:
            since, connection = idle[0]
            if not connection.open:
                idle.popleft()
                continue
            if now - since < REST_S:
                return None
            idle.popleft()
            if connection.unasked():
                connection.close()
                continue
            return connection
        return None

    async def _open(self, seconds: float) -> _Connection:
        loop = asyncio.get_running_loop()
        connecting = loop.create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._tls else None,
        )
        try:
            _, connection = await asyncio.wait_for(connecting, min(self._connect_s, seconds))
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {self._host}:{self._port}") from None
        except (OSError, ssl.SSLError) as e:
            raise httpx.ConnectError(f"{self._host}:{self._port}: {e}") from None
        self._opened += 1
        return connection


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, written whole, its response's bytes fed
    to llhttp as they arrive. Faults are httpx's exceptions, as httpx's own transport raises
    them: closed before any byte of the response `httpx.RemoteProtocolError`, closed within it
    `httpx.ReadError`, not whole by the deadline `httpx.ReadTimeout`; bytes llhttp refuses
    `MalformedResponse`, a body past the limit `ResponseTooLarge`."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self.open = False
        self._parser = httptools.HttpResponseParser(self)
        self._result: asyncio.Future[tuple[HttpResponse, bool]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._limit = 0
        self._reset()

    def _reset(self) -> None:
        self._first = b""
        self._received = 0
        self._head_bytes = 0
        self._interim = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._status = 0
        self._keep = False
        self._head_done = False
        self._until_close = False
        self._body = bytearray()
        self._decoder: zlib._Decompress | None = None
        self._complete = False

    # ------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (Ray runs async actors on uvloop) are not asyncio.Transport
        # subclasses, though they do all it does
        self._transport = cast(asyncio.Transport, transport)
        self.open = True

    def data_received(self, data: bytes) -> None:
        result = self._result
        if result is None or result.done() or self._complete:
            self.close()  # bytes nobody asked for: the connection is not reused
            return
        if self._received < FIRST_BYTES:
            self._first += data[: FIRST_BYTES - self._received]
        self._received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(self._malformed("an upgrade to another protocol"))
        except httptools.HttpParserError as e:
            cause = e.__context__ if isinstance(e, httptools.HttpParserCallbackError) else None
            self._fail(cause if isinstance(cause, Exception) else self._malformed(str(e)))
            return
        if not self._head_done and self._received > HEAD_LIMIT:
            self._fail(self._malformed(f"headers longer than {HEAD_LIMIT} bytes"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._result is None or self._result.done():
            return
        if self._head_done and self._until_close:
            try:
                self._finish()
            except MalformedResponse as e:
                self._fail(e)
        elif self._received:
            self._fail(httpx.ReadError("the server closed the connection mid-answer"))
        else:
            self._fail(httpx.RemoteProtocolError("the server closed the connection"))

    # ------------------------------------------------------------ llhttp's callbacks

    def on_message_begin(self) -> None:
        if self._complete:  # a second response to one request
            raise self._malformed("more than one answer to a request")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if self._head_bytes > HEAD_LIMIT:  # headers, interim answers' and trailers included
            raise self._malformed(f"headers longer than {HEAD_LIMIT} bytes")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue) is skipped, a few times
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise self._malformed(f"more than {MAX_INTERIM} interim (1xx) answers")
            self._headers = []
            return
        self._status, self._keep, self._head_done = status, self._parser.should_keep_alive(), True
        length = chunked = False
        for name, value in self._headers:
            key = name.lower()
            if key == b"content-length":
                length = True
            elif key == b"transfer-encoding":
                chunked = True
                if value.strip().lower() != b"chunked":
                    raise self._malformed(f"Transfer-Encoding {value[:40]!r}")
            elif key == b"content-encoding":
                coding = value.strip().lower()
                if coding in _DECODED:
                    self._decoder = zlib.decompressobj(47 if coding != b"deflate" else 15)
                elif coding != b"identity":
                    raise self._malformed(f"Content-Encoding {value[:40]!r}, never asked for")
        self._until_close = not (length or chunked) and status not in (204, 304)

    def on_body(self, piece: bytes) -> None:
        room = self._limit - len(self._body)
        if self._decoder is not None:
            try:
                piece = self._decoder.decompress(piece, room + 1)
            except zlib.error as e:
                raise self._malformed(f"a body that does not decode: {e}") from None
        if len(piece) > room or (self._decoder is not None and self._decoder.unconsumed_tail):
            raise ResponseTooLarge(_too_large(self._limit), self._first)
        self._body += piece

    def on_message_complete(self) -> None:
        if not self._head_done:
            return  # the interim response's end
        self._complete = True
        self._finish()

    # ------------------------------------------------------------ a request

    async def exchange(
        self, data: bytes, deadline: float, timeout_s: float, limit: int
    ) -> tuple[HttpResponse, bool]:
        """Write ``data`` (a whole request) and wait, until ``deadline`` (loop time), for its
        whole response, and whether the connection can take another request."""
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        self._result = result = loop.create_future()
        self._reset()
        self._limit = limit
        self._transport.write(data)
        self._timer = loop.call_at(deadline, self._expire, timeout_s)
        try:
            return await result
        finally:
            self._result = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def unasked(self) -> bool:
        """Whether bytes wait on the idle connection (checked at the socket, ahead of the
        event loop)."""
        sock = self._transport.get_extra_info("socket") if self._transport else None
        if sock is None:
            return True
        poll = select.poll()  # not select(): descriptors past 1024 are common under load
        poll.register(sock.fileno(), select.POLLIN)
        return bool(poll.poll(0))

    def close(self) -> None:
        self.open = False
        if self._transport is not None:
            self._transport.close()

    def _expire(self, timeout_s: float) -> None:
        self._timer = None
        self._fail(httpx.ReadTimeout(f"no whole answer within {timeout_s:g}s"))

    def _fail(self, error: Exception) -> None:
        if self._result is not None and not self._result.done():
            self._result.set_exception(error)
        self.close()

    def _finish(self) -> None:
        """The response is whole: hand it over (the body itself, no copy)."""
        body = self._body
        if self._decoder is not None:
            body += self._decoder.flush()
            if len(body) > self._limit:
                raise ResponseTooLarge(_too_large(self._limit), self._first)
        if self._result is not None and not self._result.done():
            response = HttpResponse(self._status, self._headers, body)
            self._result.set_result((response, self._keep and not self._until_close))

    def _malformed(self, what: str) -> MalformedResponse:
        return MalformedResponse(f"malformed HTTP answer: {what}", self._first)


def _too_large(limit: int) -> str:
    return f"an answer larger than {limit:,} bytes"


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, None when there is none or it is
    bypassed (``NO_PROXY``)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy
