"""The HTTP transport: kept-alive connections (requests at once each get their own, requests
in turn share them once rested); answers read whole however the server frames them, over plain
HTTP and TLS; the request as the server sees it; every way a server can fail becomes the httpx
error the backends map; what the RFC forbids is refused, never guessed at; answers are bounded
in size while read and requests in time in all; a stale answer never answers the next request."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import orjson
import pytest
import trustme

from tracegen.llm.transport import (
    REST_S,
    DirectTransport,
    HttpxTransport,
    MalformedResponse,
    ResponseTooLarge,
    _environment_proxy,
    transport_for,
)


class _Server:
    """An HTTP/1.1 server that answers ``{}`` after ``delay_s`` on kept-alive connections and
    counts the connections it accepted."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await asyncio.sleep(self.delay_s)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(delay_s: float = 0.0) -> AsyncIterator[tuple[_Server, str]]:
    server = _Server(delay_s)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server, f"http://127.0.0.1:{port}"


def direct(url: str, timeout_s: float = 10.0) -> DirectTransport:
    return DirectTransport(url, {}, connect_s=timeout_s, timeout_s=timeout_s)


async def get(wire: DirectTransport, body: bytes | None = None, limit: int = 1 << 20) -> object:
    """The JSON the server answered, or its status when the answer has no body."""
    answer = await wire.request("POST" if body else "GET", "/", {}, body, limit)
    return orjson.loads(answer.body) if answer.body else answer.status


async def rested() -> None:
    """Long enough for a connection to be taken again."""
    await asyncio.sleep(REST_S + 0.02)


async def test_requests_in_turn_reuse_one_connection_once_it_rested() -> None:
    async with serving() as (server, url):
        wire = direct(url)
        for _ in range(5):
            assert await get(wire) == {}
            await rested()
        assert (server.connections, wire.size) == (1, 1)
        await wire.aclose()


async def test_requests_at_once_each_get_a_connection_that_is_kept() -> None:
    async with serving(delay_s=0.05) as (server, url):
        wire = direct(url)
        for _ in range(3):
            assert await asyncio.gather(*(get(wire) for _ in range(10))) == [{}] * 10
            await rested()
        assert (server.connections, wire.size) == (10, 10)
        await wire.aclose()


def test_proxies_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _environment_proxy("http://gpu1:8000") is None
    assert isinstance(transport_for("http://gpu1:8000", {}, 10.0), DirectTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert _environment_proxy("https://api.example.com") == "http://proxy:3128"
    assert isinstance(transport_for("https://api.example.com", {}, 10.0), HttpxTransport)
    assert _environment_proxy("http://gpu1:8000") is None
    monkeypatch.setenv("ALL_PROXY", "http://all:3128")
    assert _environment_proxy("http://gpu1:8000") == "http://all:3128"
    monkeypatch.setenv("NO_PROXY", "gpu1")
    assert _environment_proxy("http://gpu1:8000") is None


# ---------------------------------------------------------------- a server scripted in bytes

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def scripted(script: Script, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A server that runs ``script`` on every connection it accepts."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def answering(*answers: bytes, pause_s: float = 0.0) -> Script:
    """Each request read is answered with the next of ``answers``, written in pieces of
    7 bytes ``pause_s`` apart (so every parser state meets a boundary)."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = [
                line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            ]
            if length:
                await reader.readexactly(int(length[0].split(b":")[1]))
            for start in range(0, len(answer), 7):
                writer.write(answer[start : start + 7])
                await writer.drain()
                if pause_s:
                    await asyncio.sleep(pause_s)
        await reader.read()

    return script


async def test_answers_are_read_whole_however_they_are_framed() -> None:
    length = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"a": 1}'
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'3;ext=1\r\n{"b\r\n5\r\n": 2}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + length
    empty = b"HTTP/1.1 204 No Content\r\n\r\n"
    async with scripted(answering(length, chunked, interim, empty, length)) as url:
        wire = direct(url)
        assert await get(wire, b"{}") == {"a": 1}
        for expected in ({"b": 2}, {"a": 1}, 204, {"a": 1}):
            await rested()
            assert await get(wire) == expected
        assert wire.size == 1


async def test_the_server_sees_the_request_httpx_would_send() -> None:
    seen: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            seen.append(await reader.readuntil(b"\r\n\r\n") + await reader.readexactly(7))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()

    async with scripted(record) as url:
        base = url.replace("http://", "http://us%40er:p%3Ass@") + "/v1/"
        wire = DirectTransport(base, {"X-Api": "k"}, connect_s=1.0, timeout_s=1.0)
        await wire.request("POST", "/chat", {"Content-Type": "application/json"}, b'{"a":1}', 99)
    head, _, body = seen[0].partition(b"\r\n\r\n")
    line, *fields = head.decode().split("\r\n")
    assert line == "POST /v1/chat HTTP/1.1" and body == b'{"a":1}'
    headers = dict(field.split(": ", 1) for field in fields)
    assert headers["Host"] == url.removeprefix("http://")
    assert headers["Authorization"] == "Basic dXNAZXI6cDpzcw=="  # us@er:p:ss
    assert (headers["X-Api"], headers["Content-Length"]) == ("k", "7")
    assert headers["Content-Type"] == "application/json"
    assert headers["Accept-Encoding"] == "identity"


async def test_a_body_that_runs_until_the_server_closes_is_read_and_not_reused() -> None:
    answer = b'HTTP/1.0 200 OK\r\n\r\n{"c": 3}'

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)

    async with scripted(script) as url:
        wire = direct(url)
        for _ in range(3):
            assert await get(wire) == {"c": 3}
            await rested()
        assert wire.size == 3


async def test_connection_close_is_honoured_and_a_connection_closed_while_idle_is_replaced() -> (
    None
):
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    kept = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    async def answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(kept)  # kept alive by its headers, closed at once by the server
        await writer.drain()

    for script in (answering(close), answer_then_close):
        async with scripted(script) as url:
            wire = direct(url)
            for _ in range(3):
                assert await get(wire) == {}
                await rested()
            assert wire.size == 3


def _cut(answer: bytes) -> Script:
    """Reads the request, sends ``answer`` and closes the connection."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()

    return script


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (_cut(b""), httpx.RemoteProtocolError),
        (_cut(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"), httpx.ReadError),
        (_cut(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}"), httpx.ReadError),
        (_cut(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), MalformedResponse),
        (_cut(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), MalformedResponse),
        (_cut(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), MalformedResponse),
    ],
    ids=[
        "closed-before-answering",
        "closed-mid-body",
        "closed-mid-chunks",
        "not-http",
        "bad-chunk",
        "bad-length",
    ],
)
async def test_a_failing_server_raises_the_error_httpx_would(script: Script, error: type) -> None:
    async with scripted(script) as url:
        with pytest.raises(error):
            await get(direct(url))


async def test_the_timeout_bounds_the_whole_request_however_the_server_drips() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with scripted(silent) as url:
        with pytest.raises(httpx.ReadTimeout):
            await get(direct(url, timeout_s=0.2))
    # 43 bytes, 7 at a time, 0.06 s apart: 0.36 s in all, never 0.2 s of silence
    loop = asyncio.get_running_loop()
    async with scripted(answering(answer, pause_s=0.06)) as url:
        started = loop.time()
        with pytest.raises(httpx.ReadTimeout, match=r"within 0\.2s"):
            await get(direct(url, timeout_s=0.2))
        assert loop.time() - started < 0.3
        assert await get(direct(url, timeout_s=1.0)) == {}


async def test_nothing_listening_is_a_connect_error() -> None:
    async with scripted(_cut(b"")) as url:
        pass  # the port is free again
    with pytest.raises(httpx.ConnectError):
        await get(direct(url))


async def test_https_hosts_are_reached_over_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    monkeypatch.setattr(httpx, "create_ssl_context", lambda: client)
    answer = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"t": 1}'
    async with scripted(answering(answer, answer), tls=server) as url:
        wire = direct(url)
        assert await get(wire) == {"t": 1}
        await rested()
        assert await get(wire) == {"t": 1}
        assert wire.size == 1
    monkeypatch.setattr(httpx, "create_ssl_context", ssl.create_default_context)
    async with scripted(answering(answer), tls=server) as url:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await get(direct(url))


def test_a_url_that_is_not_http_is_refused() -> None:
    for url in ("ftp://gpu1", "http://", "gpu1:8000"):
        with pytest.raises(ValueError, match="http"):
            direct(url)


# ---------------------------------------------------------------- what the RFC forbids

OK_HEAD = b"HTTP/1.1 200 OK\r\n"


def _held(answer: bytes) -> Script:
    """Reads the request, sends ``answer`` and keeps the connection open."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        await reader.read()

    return script


@pytest.mark.parametrize(
    "answer",
    [
        OK_HEAD + b'Transfer-Encoding: chunked\r\n\r\n4\r\n{"a"5\r\n: 1}\r\n0\r\n\r\n',
        OK_HEAD + b'Content-Length: 8\r\nContent-Length: 6\r\n\r\n{"a": 1}',
        b"HTTP/1.1 2001 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.9 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        OK_HEAD + b"Transfer-Encoding: xchunkedx\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        OK_HEAD + b"Content-Length: +6_8\r\n\r\n{}",
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
        OK_HEAD + b"Content-Length : 2\r\n\r\n{}",
        OK_HEAD + b"Content-Encoding: br\r\nContent-Length: 2\r\n\r\n{}",
        OK_HEAD + b"X-Long: " + b"x" * 70_000,
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\n" + b"X-Trailer: xxxxxxxx\r\n" * 4000,
    ],
    ids=[
        "chunk-without-crlf",
        "conflicting-content-lengths",
        "status-2001",
        "http-1.9",
        "bogus-transfer-encoding",
        "signed-length",
        "hex-prefixed-chunk-size",
        "bare-lf",
        "space-before-colon",
        "encoding-never-asked-for",
        "endless-header",
        "endless-trailers",
    ],
)
async def test_what_the_rfc_forbids_is_refused_at_once_with_the_first_bytes(answer: bytes) -> None:
    loop = asyncio.get_running_loop()
    async with scripted(_held(answer)) as url:
        started = loop.time()
        with pytest.raises(MalformedResponse) as refused:
            await get(direct(url, timeout_s=5.0))
    assert loop.time() - started < 1.0
    assert refused.value.first == answer[:64]


async def test_a_gzip_answer_is_decoded_within_the_limit() -> None:
    import gzip

    body = gzip.compress(b'{"z": "' + b"z" * 5000 + b'"}')
    answer = OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    async with scripted(answering(answer, answer)) as url:
        wire = direct(url)
        assert await get(wire) == {"z": "z" * 5000}
        await rested()
        with pytest.raises(ResponseTooLarge):  # 5 kB once decoded, from a 50-byte body
            await get(wire, limit=4096)


async def test_an_answer_past_its_limit_is_refused_while_read() -> None:
    """An endless chunked body and a huge declared one both stop at the limit: what is
    read past it is never kept."""
    sent: list[int] = []

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        sent.append(0)
        while True:
            writer.write(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
            sent[0] += 0x4000
            await writer.drain()

    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK_HEAD + b"Content-Length: 3000000000\r\n\r\n" + b"y" * 300_000)
        await writer.drain()
        await reader.read()

    for script in (endless, huge):
        async with scripted(script) as url:
            with pytest.raises(ResponseTooLarge, match="larger than 100,000 bytes"):
                await get(direct(url, timeout_s=5.0), limit=100_000)
    assert sent[0] < 10_000_000


async def test_a_late_answer_never_answers_the_next_request() -> None:
    """The server answers each request twice, the second 30 ms later: the next request,
    sent at once or after the late one arrived, gets its own answer."""
    count = 0

    async def twice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        while True:
            await reader.readuntil(b"\r\n\r\n")
            count += 1
            body = b'{"n": %d}' % count
            writer.write(OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
            await asyncio.sleep(0.03)
            stale = b'{"n": -%d}' % count
            writer.write(OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(stale) + stale)
            await writer.drain()

    async with scripted(twice) as url:
        wire = direct(url)
        seen = []
        for pause in (0.0, 0.0, 0.04, 0.0, 0.2, 0.01):
            seen.append(await get(wire))
            await asyncio.sleep(pause)
    assert all(answer["n"] > 0 for answer in seen), seen  # type: ignore[index]


async def test_through_httpx_answers_are_bounded_too() -> None:
    """A host behind a proxy (httpx's client) keeps the same bounds: size and deadline."""

    async def huge(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b" " * 200_000)

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, content=b"{}")

    wire = transport_for("http://gpu1", {}, 0.3, httpx.MockTransport(huge))
    with pytest.raises(ResponseTooLarge):
        await wire.request("GET", "/", {}, None, 100_000)
    assert (await wire.request("GET", "/", {}, None, 300_000)).body == b" " * 200_000
    wire = transport_for("http://gpu1", {}, 0.3, httpx.MockTransport(slow))
    with pytest.raises(httpx.ReadTimeout):
        await wire.request("GET", "/", {}, None, 100_000)


def test_answers_are_read_on_uvloop_as_ray_actors_run() -> None:
    """Ray's async actors run on uvloop, whose transports are not asyncio.Transport's."""
    uvloop = pytest.importorskip("uvloop")

    async def one_request() -> object:
        async with serving() as (_server, url):
            wire = direct(url)
            try:
                return await get(wire)
            finally:
                await wire.aclose()

    assert uvloop.run(one_request()) == {}
