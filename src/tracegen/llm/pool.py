"""`HostPool`: one `Backend` over several model servers.

Each request goes to the available host with the fewest requests in flight, at most
``limit`` per host; among those, one that served the caller's previous request (its
prompt prefix is cached there) wins the tie. A host whose requests fail
``failures_to_bench`` times in a row (after its own retries) is benched for ``bench_s``,
doubling on each consecutive bench up to ``max_bench_s`` (requests that were in flight and
fail while it is benched do not bench it again); the failed request is retried on
a host it has not tried yet. When every host is benched, requests wait for the earliest to
return (after a bench, one more failure benches it again). When every host is benched and
none has answered for ``max_outage_s``, the pool gives up with `BackendUnavailable` and
keeps it in ``outage`` so the runner can stop instead of failing episode after episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from tracegen.errors import BackendError, BackendUnavailable
from tracegen.llm.base import ChatRequest, Completion, ContinueChoice, HostBackend

_last_host: ContextVar[str | None] = ContextVar("tracegen_last_host", default=None)
T = TypeVar("T")


@dataclass
class HostState:
    """Live counters of one host, shown in the run summary."""

    backend: HostBackend
    in_flight: int = 0
    served: int = 0
    failures: int = 0
    streak: int = 0
    benches: int = 0
    times_benched: int = 0
    benched_until: float = 0.0
    last_error: str | None = None
    max_in_flight: int = 0

    @property
    def name(self) -> str:
        return self.backend.host


class HostPool:
    """A `Backend` spreading requests over several hosts; see the module docstring."""

    def __init__(
        self,
        backends: Sequence[HostBackend],
        *,
        limit: int,
        failures_to_bench: int = 3,
        bench_s: float = 5.0,
        max_bench_s: float = 120.0,
        max_outage_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not backends:
            raise ValueError("HostPool needs at least one backend")
        self.hosts = [HostState(b) for b in backends]
        self.model = backends[0].model
        self.capabilities = backends[0].capabilities
        self.kind: str | None = None
        """The backend kind (``--backend``) its hosts were found to be, once known."""
        self.limit = limit
        self.failures_to_bench = failures_to_bench
        self.bench_s = bench_s
        self.max_bench_s = max_bench_s
        self.max_outage_s = max_outage_s
        self.outage: BackendUnavailable | None = None
        self._clock = clock
        self._last_success = clock()
        self._changed = asyncio.Condition()

    @property
    def in_flight(self) -> int:
        return sum(h.in_flight for h in self.hosts)

    async def chat(self, request: ChatRequest) -> Completion:
        return await self.call(lambda b: _from(b, b.chat(request)))

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        return await self.call(lambda b: _from(b, b.continue_message(request, method)))

    def bench(self, host: str, reason: str) -> None:
        """Take ``host`` out now (for example when it did not answer before the run)."""
        for h in self.hosts:
            if h.name == host:
                h.last_error = reason
                self._bench(h)

    def _bench(self, h: HostState) -> None:
        h.benches += 1
        h.times_benched += 1
        h.streak = self.failures_to_bench - 1
        delay = min(self.max_bench_s, self.bench_s * 2 ** (h.benches - 1))
        h.benched_until = self._clock() + delay

    async def call(self, send: Callable[[HostBackend], Awaitable[T]]) -> T:
        """``send(backend)`` on a host chosen as the module docstring says, holding one of its
        ``limit`` slots until it returns: a model request, or a whole episode run elsewhere
        on that host (a retryable `BackendError` counts as the host's failure)."""
        tried: set[str] = set()
        while True:
            h = await self._acquire(tried)
            tried.add(h.name)
            try:
                result = await send(h.backend)
            except BackendError as e:
                if not e.retryable:
                    raise
                h.failures += 1
                h.streak += 1
                h.last_error = str(e)
                if h.streak >= self.failures_to_bench and h.benched_until <= self._clock():
                    self._bench(h)
                if len(tried) >= len(self.hosts):
                    raise
            else:
                h.served += 1
                h.streak = 0
                h.benches = 0
                h.benched_until = 0.0
                self._last_success = self._clock()
                _last_host.set(h.name)
                return result
            finally:
                h.in_flight -= 1
                async with self._changed:
                    self._changed.notify_all()

    async def _acquire(self, tried: set[str]) -> HostState:
        """Wait for an untried, unbenched host with a free slot; take the least busy one."""
        async with self._changed:
            while True:
                if self.outage is not None:
                    raise self.outage
                now = self._clock()
                candidates = [h for h in self.hosts if h.name not in tried]
                up = [h for h in candidates if h.benched_until <= now]
                free = [h for h in up if h.in_flight < self.limit]
                if free:
                    last = _last_host.get()
                    h = min(free, key=lambda x: (x.in_flight, x.name != last))
                    h.in_flight += 1
                    h.max_in_flight = max(h.max_in_flight, h.in_flight)
                    return h
                timeout: float | None = None
                if not up:
                    all_down = all(h.benched_until > now for h in self.hosts)
                    if all_down and now - self._last_success >= self.max_outage_s:
                        self.outage = self._outage_error()
                        self._changed.notify_all()
                        raise self.outage
                    timeout = min(h.benched_until for h in candidates) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)

    def _outage_error(self) -> BackendUnavailable:
        details = "; ".join(f"{h.name}: {h.last_error}" for h in self.hosts)
        return BackendUnavailable(f"no host has answered for {self.max_outage_s:g}s ({details})")

    async def aclose(self) -> None:
        for h in self.hosts:
            await h.backend.aclose()


async def _from(backend: HostBackend, answer: Awaitable[Completion]) -> Completion:
    """The completion, naming the host that answered unless the backend did."""
    completion = await answer
    if not completion.host:
        completion.host = backend.host
    return completion
