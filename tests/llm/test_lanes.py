"""One kept-alive connection per in-flight request: requests in turn share one connection,
requests at once each get their own, and no more connections are opened than were ever in
flight at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from tracegen.llm.lanes import Lanes, _environment_proxy


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


async def test_requests_in_turn_reuse_one_connection() -> None:
    async with serving() as (server, url):
        lanes = Lanes(url)
        async with httpx.AsyncClient(base_url=url, transport=lanes) as client:
            for _ in range(20):
                assert (await client.get("/")).json() == {}
            assert (server.connections, lanes.size) == (1, 1)


async def test_requests_at_once_each_get_a_connection_that_is_kept() -> None:
    async with serving(delay_s=0.05) as (server, url):
        lanes = Lanes(url)
        async with httpx.AsyncClient(base_url=url, transport=lanes) as client:
            for _ in range(3):
                answers = await asyncio.gather(*(client.get("/") for _ in range(10)))
                assert all(a.status_code == 200 for a in answers)
            assert (server.connections, lanes.size) == (10, 10)


async def test_a_response_not_read_to_its_end_gives_its_lane_back() -> None:
    async with serving() as (_server, url):
        lanes = Lanes(url)
        async with httpx.AsyncClient(base_url=url, transport=lanes) as client:
            for _ in range(5):
                async with client.stream("GET", "/"):
                    pass
            assert (await client.get("/")).json() == {}
            assert lanes.size == 1


def test_proxies_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _environment_proxy("http://gpu1:8000") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert _environment_proxy("https://api.example.com") == "http://proxy:3128"
    assert _environment_proxy("http://gpu1:8000") is None
    monkeypatch.setenv("ALL_PROXY", "http://all:3128")
    assert _environment_proxy("http://gpu1:8000") == "http://all:3128"
    monkeypatch.setenv("NO_PROXY", "gpu1")
    assert _environment_proxy("http://gpu1:8000") is None
