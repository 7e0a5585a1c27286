"""The wire: one kept-alive connection per in-flight request (requests in turn share one
connection, requests at once each get their own, no more connections are opened than were
ever in flight at once); answers read whole however the server frames them, over plain HTTP
and TLS; the request as the server sees it; and every way a server can fail becomes the
httpx error the backends map."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import orjson
import pytest
import trustme

from tracegen.llm.lanes import HttpxWire, Lanes, _environment_proxy, wire_for


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


def lanes(url: str, timeout_s: float = 10.0) -> Lanes:
    return Lanes(url, {}, connect_s=timeout_s, read_s=timeout_s)


async def get(wire: Lanes, body: bytes | None = None) -> object:
    """The JSON the server answered, or its status when the answer has no body."""
    answer = await wire.request("POST" if body else "GET", "/", {}, body)
    return orjson.loads(answer.body) if answer.body else answer.status


async def test_requests_in_turn_reuse_one_connection() -> None:
    async with serving() as (server, url):
        wire = lanes(url)
        for _ in range(20):
            assert await get(wire) == {}
        assert (server.connections, wire.size) == (1, 1)
        await wire.aclose()


async def test_requests_at_once_each_get_a_connection_that_is_kept() -> None:
    async with serving(delay_s=0.05) as (server, url):
        wire = lanes(url)
        for _ in range(3):
            assert await asyncio.gather(*(get(wire) for _ in range(10))) == [{}] * 10
        assert (server.connections, wire.size) == (10, 10)
        await wire.aclose()


def test_proxies_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _environment_proxy("http://gpu1:8000") is None
    assert isinstance(wire_for("http://gpu1:8000", {}, 10.0), Lanes)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert _environment_proxy("https://api.example.com") == "http://proxy:3128"
    assert isinstance(wire_for("https://api.example.com", {}, 10.0), HttpxWire)
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
        wire = lanes(url)
        assert await get(wire, b"{}") == {"a": 1}
        assert await get(wire) == {"b": 2}
        assert await get(wire) == {"a": 1}
        assert await get(wire) == 204
        assert await get(wire) == {"a": 1}
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
        wire = Lanes(base, {"X-Api": "k"}, connect_s=1.0, read_s=1.0)
        await wire.request("POST", "/chat", {"Content-Type": "application/json"}, b'{"a":1}')
    head, _, body = seen[0].partition(b"\r\n\r\n")
    line, *fields = head.decode().split("\r\n")
    assert line == "POST /v1/chat HTTP/1.1" and body == b'{"a":1}'
    headers = dict(field.split(": ", 1) for field in fields)
    assert headers["Host"] == url.removeprefix("http://")
    assert headers["Authorization"] == "Basic dXNAZXI6cDpzcw=="  # us@er:p:ss
    assert (headers["X-Api"], headers["Content-Length"]) == ("k", "7")
    assert headers["Content-Type"] == "application/json"


async def test_a_body_that_runs_until_the_server_closes_is_read_and_not_reused() -> None:
    answer = b'HTTP/1.0 200 OK\r\n\r\n{"c": 3}'

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)

    async with scripted(script) as url:
        wire = lanes(url)
        for _ in range(3):
            assert await get(wire) == {"c": 3}
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
            wire = lanes(url)
            for _ in range(3):
                assert await get(wire) == {}
                await asyncio.sleep(0.05)
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
        (_cut(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), httpx.ReadError),
        (_cut(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), httpx.ReadError),
        (_cut(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), httpx.ReadError),
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
            await get(lanes(url))


async def test_silence_times_out_but_a_slow_steady_answer_does_not() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with scripted(silent) as url:
        with pytest.raises(httpx.ReadTimeout):
            await get(lanes(url, timeout_s=0.2))
    # 43 bytes, 7 at a time, 0.06 s apart: 0.36 s in all, never 0.2 s of silence
    async with scripted(answering(answer, pause_s=0.06)) as url:
        assert await get(lanes(url, timeout_s=0.2)) == {}


async def test_nothing_listening_is_a_connect_error() -> None:
    async with scripted(_cut(b"")) as url:
        pass  # the port is free again
    with pytest.raises(httpx.ConnectError):
        await get(lanes(url))


async def test_https_hosts_are_reached_over_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    monkeypatch.setattr(httpx, "create_ssl_context", lambda: client)
    answer = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"t": 1}'
    async with scripted(answering(answer, answer), tls=server) as url:
        wire = lanes(url)
        assert [await get(wire) for _ in range(2)] == [{"t": 1}] * 2
        assert wire.size == 1
    monkeypatch.setattr(httpx, "create_ssl_context", ssl.create_default_context)
    async with scripted(answering(answer), tls=server) as url:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await get(lanes(url))


def test_a_url_that_is_not_http_is_refused() -> None:
    for url in ("ftp://gpu1", "http://", "gpu1:8000"):
        with pytest.raises(ValueError, match="http"):
            lanes(url)
