"""The Ray executor: episodes on long-lived async actors across a Ray cluster, while this
process (the driver) stays the only writer of the run files.

- **Actors.** One `EpisodeActor` per eligible node: the nodes offering the custom resource
  `RESOURCE` (``ray start --resources '{"tracegen_sandbox": 1}'``), so sandboxes never land
  on GPU or head nodes, or every node when none does. Each owns a warm sandbox sized to its
  node's CPUs and one backend per model host, and runs many episodes at once (an async
  actor: one Ray task per episode measured 20× slower). Every `REFRESH_S` the driver starts
  an actor on any eligible node without a live one (a node that joined, or whose actor died).
- **Hosts.** The driver keeps the host pool: each episode takes a slot on the host with the
  fewest episodes in flight and stays there for all its requests, which carry its trace id
  as ``X-Session-ID``, so ``--concurrency`` holds per host across the cluster. An episode
  the backend gave up on counts as a failure of its host, which is benched as in a local
  run; errors no episode would survive (unknown model, bad key) stop the run.
- **Back-pressure.** An actor gets at most its share of the cluster's slots (by CPUs) in
  flight, and the episode goes to the actor least loaded for its share.
- **Failures.** An actor or node that dies loses only its episodes in flight: they run
  again on another actor after a back-off (1 s, doubling), are not recorded as attempted
  and are never written twice; one lost `MAX_LOSSES` times is recorded as failed. The
  driver dying is a kill -9 of a local run (Ray ends its actors); Ctrl-C cancels the
  episodes on the actors as it does local ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracegen.config import RunSettings
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import BackendError, ClusterError, MissingExtraError, TracegenError
from tracegen.generate.episode import run_episode
from tracegen.generate.executor import CountingRunner, Executor
from tracegen.llm.base import HostBackend, session
from tracegen.llm.factory import backend_for
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.schema import Trace, TraceError

try:
    import ray
    from ray.exceptions import RayActorError, RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError:
    raise MissingExtraError(
        "--executor ray needs Ray: pip install 'tracegen[ray]' (on every node of the cluster)"
    ) from None

RESOURCE = "tracegen_sandbox"
"""The custom resource that marks the nodes where sandboxes may run."""
REFRESH_S = 5.0
START_TIMEOUT_S = 300.0
"""How long an actor may take to start (a worker process, imports, a warm sandbox)."""
MAX_LOSSES = 5
"""How often an episode may be lost with its actor before it is recorded as failed."""
NO_ACTOR_S = 600.0
"""How long episodes wait for a live actor before the run stops."""
LOCAL_OBJECT_STORE = 256 << 20
"""The object store of a Ray instance tracegen starts itself (Ray's default is 30% of RAM)."""


@dataclass
class Result:
    """What an actor sends back for one episode, with its counters since its last result."""

    trace: Trace | None
    error: TracegenError | None
    """An error no episode would survive (unknown model, bad key, a broken setting)."""
    retries: int
    executions: int


class EpisodeActor:
    """Runs episodes on one node: a warm sandbox, a backend per host (see the module docstring)."""

    def __init__(self, settings: RunSettings, cpus: int) -> None:
        self.settings = settings
        self.cpus = cpus
        self.backends: dict[str, HostBackend] = {}
        self.sandbox: Sandbox | None = None
        self.runner: CountingRunner | None = None
        self.retries = 0
        self.reported = (0, 0)

    async def start(self) -> tuple[str, str | None] | TracegenError:
        """Warm the sandbox: its isolation and warning, or the error that prevents it."""
        s = self.settings
        limits = SandboxLimits.for_timeout(s.exec_timeout)
        try:
            self.sandbox = Sandbox(isolation=s.sandbox, limits=limits, concurrency=self.cpus)
            await self.sandbox.__aenter__()
        except TracegenError as e:
            return e
        self.runner = CountingRunner(self.sandbox)
        return self.sandbox.isolation, self.sandbox.warning

    async def run(self, spec: EpisodeSpec, host: str) -> Result:
        assert self.runner is not None, "start the actor first"
        backend = self.backends.get(host)
        if backend is None:
            backend = self.backends[host] = backend_for(self.settings, host, on_retry=self._retry)
        trace: Trace | None = None
        error: TracegenError | None = None
        try:
            with session(spec.trace_id):
                trace = await run_episode(spec, backend, self.runner)
        except TracegenError as e:
            error = e
        retries, executions = self.retries, self.runner.executions
        result = Result(trace, error, retries - self.reported[0], executions - self.reported[1])
        self.reported = (retries, executions)
        return result

    async def stop(self) -> None:
        for backend in self.backends.values():
            await backend.aclose()
        if self.sandbox is not None:
            await self.sandbox.aclose()

    def _retry(self, message: str) -> None:
        self.retries += 1


_RemoteActor: Any = ray.remote(EpisodeActor)


@dataclass
class _Actor:
    handle: Any
    node: str
    address: str
    cpus: int
    in_flight: int = 0
    episodes: int = 0
    alive: bool = True

    @property
    def name(self) -> str:
        return f"{self.address} ({self.node[:8]}, {self.cpus} CPUs)"


class _Lost(Exception):
    """The episode's actor (or its node) died: nothing came back."""


class _HostGaveUp(BackendError):
    """An episode the backend gave up on: a failure of its host, for the pool."""

    retryable = True

    def __init__(self, trace: Trace) -> None:
        assert trace.error is not None
        super().__init__(trace.error.message)
        self.trace = trace


def eligible_nodes() -> list[dict[str, Any]]:
    """Live nodes offering `RESOURCE`, or every live node when none does."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    tagged = [n for n in alive if n.get("Resources", {}).get(RESOURCE, 0) > 0]
    return tagged or alive


class Actors:
    """The live actors, one per eligible node, and the episodes in flight on each."""

    def __init__(self, settings: RunSettings, slots: int, warn: Callable[[str], None]) -> None:
        self.settings = settings
        self.slots = slots
        self.warn = warn
        self.actors: list[_Actor] = []
        self.lost = 0
        self.deaths = 0
        self.isolation = ""
        self.refused: dict[str, str] = {}
        """Nodes where an actor could not start, and why."""
        self._changed = asyncio.Condition()
        self._warned: set[str] = set()

    @property
    def alive(self) -> list[_Actor]:
        return [a for a in self.actors if a.alive]

    async def refresh(self) -> None:
        """Start an actor on each eligible node that has no live one."""
        covered = {a.node for a in self.alive} | set(self.refused)
        nodes = [n for n in eligible_nodes() if n["NodeID"] not in covered]
        started = await asyncio.gather(*(self._start(n) for n in nodes))
        fresh = [a for a in started if a is not None]
        if fresh:
            async with self._changed:
                self.actors.extend(fresh)
                self._changed.notify_all()

    async def _start(self, node: dict[str, Any]) -> _Actor | None:
        cpus = max(1, int(node.get("Resources", {}).get("CPU", 1)))
        handle = _RemoteActor.options(
            num_cpus=0,
            max_concurrency=self.slots + 16,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(self.settings, cpus)
        try:
            started = await asyncio.wait_for(_await(handle.start.remote()), START_TIMEOUT_S)
        except (RayError, TimeoutError):
            ray.kill(handle, no_restart=True)
            return None
        if isinstance(started, TracegenError):
            ray.kill(handle, no_restart=True)
            self.refused[node["NodeID"]] = str(started)
            self.warn(f"{node.get('NodeManagerAddress')}: {started}; no episodes run there")
            return None
        self.isolation, warning = started
        if warning and warning not in self._warned:
            self._warned.add(warning)
            self.warn(f"{node.get('NodeManagerAddress')}: {warning}")
        return _Actor(handle, node["NodeID"], str(node.get("NodeManagerAddress")), cpus)

    async def keep_up(self) -> None:
        """`refresh` every `REFRESH_S`, through a moment the cluster does not answer."""
        while True:
            await asyncio.sleep(REFRESH_S)
            with contextlib.suppress(RayError):
                await self.refresh()

    def share(self, actor: _Actor) -> int:
        """How many episodes ``actor`` may have in flight: its part of the slots, by CPUs."""
        cpus = sum(a.cpus for a in self.alive) or 1
        return max(1, math.ceil(self.slots * actor.cpus / cpus))

    async def acquire(self) -> _Actor:
        """The live actor least loaded for its share, once one has room."""
        waited_since = time.monotonic()
        async with self._changed:
            while True:
                free = [a for a in self.alive if a.in_flight < self.share(a)]
                if free:
                    actor = min(free, key=lambda a: a.in_flight / self.share(a))
                    actor.in_flight += 1
                    return actor
                if not self.alive and time.monotonic() - waited_since > NO_ACTOR_S:
                    raise ClusterError(
                        f"no Ray node has run episodes for {NO_ACTOR_S:.0f}s (no live "
                        f"tracegen actor); once nodes are back, run the same command to resume"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), REFRESH_S)

    async def release(self, actor: _Actor) -> None:
        async with self._changed:
            actor.in_flight -= 1
            self._changed.notify_all()

    def died(self, actor: _Actor) -> None:
        if actor.alive:
            actor.alive = False
            self.deaths += 1
            ray.kill(actor.handle, no_restart=True)

    async def stop(self) -> None:
        """Close the actors' sandboxes and clients, then end them."""
        alive = self.alive
        stops = [_await(a.handle.stop.remote()) for a in alive]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*stops, return_exceptions=True), 10)
        for actor in alive:
            ray.kill(actor.handle, no_restart=True)

    def detail(self) -> str:
        return f"actors {len(self.alive)}"


async def _await(ref: Any) -> Any:
    """An `ObjectRef`'s value; a cancelled wait cancels the task on its actor."""
    try:
        return await ref
    except asyncio.CancelledError:
        ray.cancel(ref)
        raise


class RayExecutor(Executor):
    """Runs a plan's remaining episodes on Ray actors; see the module docstring."""

    unit = "episodes"
    in_process = False
    actors: Actors
    _keeper: asyncio.Task[None] | None = None

    async def open(self) -> str:
        _connect(self.settings.ray_address)
        slots = self.settings.concurrency * len(self.settings.hosts)
        self.actors = Actors(self.settings, slots, self.reporter.warn)
        try:
            await self.actors.refresh()
            if not self.actors.alive:
                why = next(iter(self.actors.refused.values()), "it did not start in time")
                raise ClusterError(f"no Ray node could start a tracegen actor: {why}")
        except BaseException:
            await self.close()
            raise
        self._keeper = asyncio.create_task(self.actors.keep_up())
        self.reporter.detail = self.actors.detail
        nodes = len(self.actors.alive)
        return f"Ray: {nodes} actor(s), one per node, sandbox {self.actors.isolation}"

    async def close(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
        await self.actors.stop()
        ray.shutdown()

    async def run_one(self, spec: EpisodeSpec) -> Trace:
        losses = 0
        runs = 0

        async def on_host(backend: HostBackend) -> Trace:
            nonlocal runs
            runs += 1
            if runs > 1:  # the pool moved it off a host that gave up on it
                self.stats.put_back += 1
            return await self._on_actor(spec, backend.host)

        while True:
            runs = 0
            try:
                return await self.pool.call(on_host)
            except _HostGaveUp as e:
                return e.trace
            except _Lost:
                losses += 1
                self.actors.lost += 1
                if losses >= MAX_LOSSES:
                    message = f"its Ray actor died {losses} times while running it"
                    return spec.failed(
                        TraceError(kind="internal", reason="worker_lost", message=message)
                    )
                await asyncio.sleep(min(30.0, 2.0 ** (losses - 1)))

    async def _on_actor(self, spec: EpisodeSpec, host: str) -> Trace:
        actor = await self.actors.acquire()
        try:
            result: Result = await _await(actor.handle.run.remote(spec, host))
        except RayActorError:
            self.actors.died(actor)
            raise _Lost from None
        except RayError:
            raise _Lost from None
        finally:
            await self.actors.release(actor)
        actor.episodes += 1
        self.stats.retries += result.retries
        self.stats.executions += result.executions
        if result.error is not None:
            raise result.error
        assert result.trace is not None
        error = result.trace.error
        if error is not None and error.kind == "backend":
            raise _HostGaveUp(result.trace)
        return result.trace

    def summary_rows(self) -> list[tuple[str, str]]:
        a = self.actors
        rows = [
            (
                "Ray actors",
                f"{len(a.actors)} started, {a.deaths} died; {a.lost} episodes lost with an "
                "actor (run again)",
            )
        ]
        rows += [(f"actor {x.name}", f"{x.episodes} episodes") for x in a.actors]
        return rows


def _connect(address: str | None) -> None:
    """Join the cluster at ``address`` (``auto``, HOST:PORT, or RAY_ADDRESS), or start a local
    Ray with a small object store when neither is given."""
    options: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    if address is None and not os.environ.get("RAY_ADDRESS"):
        options |= {"include_dashboard": False, "object_store_memory": LOCAL_OBJECT_STORE}
    try:
        ray.init(address=address, **options)
    except Exception as e:
        where = address or os.environ.get("RAY_ADDRESS") or "a local Ray"
        hint = ""
        if "auth" in str(e).lower():
            hint = " (Ray ≥ 2.59 uses token auth: set RAY_AUTH_MODE the same on every node)"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cannot join {where}: {first}{hint}") from None
