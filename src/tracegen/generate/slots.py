"""Which worker takes the next episode: each worker's share of the run's slots, and the one
least loaded for its share, in O(log n) per episode at any number of workers.

A worker (a Ray actor, one per node) may have ``share = ceil(slots × cpus / all cpus)``
episodes in flight, so the shares add up to at least the slots and a free slot always has
a worker while any lives. The shares are computed again only when a worker joins or leaves
(O(n), rare); each take and give-back is a heap push and pop (lazy: an entry whose worker
has changed since is skipped, and the heap is rebuilt when stale entries outnumber the
live ones). A give-back wakes one waiter, a join all of them: never a stampede per episode.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

W = TypeVar("W", bound=Hashable)


@dataclass
class _Load:
    cpus: int
    share: int = 1
    in_flight: int = 0
    version: int = 0


@dataclass
class Slots(Generic[W]):
    """The run's ``slots`` spread over the workers by CPUs; see the module docstring."""

    slots: int
    _loads: dict[W, _Load] = field(default_factory=dict)
    _heap: list[tuple[float, int, int, W]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self._loads)

    def add(self, worker: W, cpus: int) -> None:
        """A worker joins: every share is computed again, and every waiter may look."""
        self._loads[worker] = _Load(max(1, cpus))
        self._reshare()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def remove(self, worker: W) -> None:
        """A worker leaves (its episodes in flight are given back later, or never)."""
        if self._loads.pop(worker, None) is not None:
            self._reshare()

    def share(self, worker: W) -> int:
        return self._loads[worker].share

    def in_flight(self, worker: W) -> int:
        load = self._loads.get(worker)
        return load.in_flight if load is not None else 0

    def take(self) -> W | None:
        """The worker least loaded for its share, with one more episode in flight; None when
        every worker is full."""
        heap = self._heap
        while heap:
            _, _, version, worker = heapq.heappop(heap)
            load = self._loads.get(worker)
            if load is None or load.version != version or load.in_flight >= load.share:
                continue
            load.in_flight += 1
            self._push(worker, load)
            return worker
        return None

    def take_from(self, worker: W) -> bool:
        """One more episode in flight on ``worker``, if it has room for it."""
        load = self._loads.get(worker)
        if load is None or load.in_flight >= load.share:
            return False
        load.in_flight += 1
        self._push(worker, load)
        return True

    def give_back(self, worker: W) -> None:
        """One of ``worker``'s episodes is over; the first waiter may take its slot."""
        load = self._loads.get(worker)
        if load is None:
            return
        load.in_flight -= 1
        self._push(worker, load)
        self._wake_one()

    async def wait(self, timeout: float) -> None:
        """Until a slot may be free (a give-back or a join), or ``timeout`` seconds."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            if waiter.done():  # woken, but it will not take the slot: the next one may
                self._wake_one()
            raise
        finally:
            if not waiter.done():
                waiter.cancel()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _push(self, worker: W, load: _Load) -> None:
        load.version += 1
        if load.in_flight < load.share:
            entry = (load.in_flight / load.share, next(self._order), load.version, worker)
            heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._loads) + 64:
            self._rebuild()

    def _reshare(self) -> None:
        cpus = sum(load.cpus for load in self._loads.values()) or 1
        for load in self._loads.values():
            load.share = max(1, math.ceil(self.slots * load.cpus / cpus))
        self._rebuild()

    def _rebuild(self) -> None:
        self._heap = []
        for worker, load in self._loads.items():
            load.version += 1
            if load.in_flight < load.share:
                entry = (load.in_flight / load.share, next(self._order), load.version, worker)
                self._heap.append(entry)
        heapq.heapify(self._heap)
