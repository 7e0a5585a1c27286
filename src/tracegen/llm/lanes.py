"""One kept-alive connection per in-flight request: an HTTP transport whose cost does not
grow with the number of connections.

httpx's pool (httpcore 1.0) scans every connection it holds, some checks quadratically,
each time a request starts or ends: with a hundred requests in flight that scan costs more
CPU than the request itself. `Lanes` gives each request a lane of its own, a transport with
a single connection, taken from a free list and put back when the response has been read,
so starting a request is O(1) however many are in flight, and a connection is reused by the
next request that takes its lane.

Proxies come from the environment as httpx would take them (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``).
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import httpx

_ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1)


class Lanes(httpx.AsyncBaseTransport):
    """A free list of single-connection transports to the one server at ``url``."""

    def __init__(self, url: str) -> None:
        self._proxy = _environment_proxy(url)
        # Made once and shared by every lane; loading the CA store costs ~70 ms, so only
        # where TLS can happen.
        tls = urlsplit(url).scheme == "https" or self._proxy is not None
        self._ssl = httpx.create_ssl_context(verify=tls)
        self._idle: list[httpx.AsyncHTTPTransport] = []
        self._lanes: list[httpx.AsyncHTTPTransport] = []

    @property
    def size(self) -> int:
        """How many lanes (connections at most) were opened so far."""
        return len(self._lanes)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        lane = self._idle.pop() if self._idle else self._open()
        try:
            response = await lane.handle_async_request(request)
        except BaseException:
            self._idle.append(lane)
            raise
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Releasing(stream, lambda: self._idle.append(lane)),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        for lane in self._lanes:
            await lane.aclose()
        self._idle.clear()
        self._lanes.clear()

    def _open(self) -> httpx.AsyncHTTPTransport:
        lane = httpx.AsyncHTTPTransport(verify=self._ssl, limits=_ONE, proxy=self._proxy)
        self._lanes.append(lane)
        return lane


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its lane back once closed (read to its end or not)."""

    def __init__(self, inner: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._inner = inner
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, None when there is none or it is
    bypassed (``NO_PROXY``)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy
