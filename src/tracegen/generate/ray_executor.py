"""The Ray executor: episodes on long-lived async actors across a Ray cluster, while this
process (the driver) stays the only writer of the run files.

- **Actors.** One `EpisodeActor` per eligible node: the nodes offering the custom resource
  `RESOURCE` (``ray start --resources '{"tracegen_sandbox": 1}'``), so sandboxes never land
  on GPU or head nodes, or every node when none does. Each owns a warm sandbox sized to its
  node's CPUs and one backend per model host, and runs many episodes at once (an async
  actor: one Ray task per episode measured 20× slower). It is given the run's fixed parts
  (settings, system prompt) once, when it starts; an episode then travels as its problem,
  sample, id and seed. Every `REFRESH_S` the driver lists the nodes (in a thread: the
  listing blocks) and starts an actor on each eligible node without a live or starting one
  (a node that joined, or whose actor died). Each start runs on its own, so a slow node
  holds up no other; a start that fails is retried at the next refresh, and its Ray error
  is kept to be reported as it was.
- **Hosts.** The driver keeps the host pool: each episode takes a slot on the host with the
  fewest episodes in flight and stays there for all its requests, which carry its trace id
  as ``X-Session-ID``, so ``--concurrency`` holds per host across the cluster. An episode
  the backend gave up on counts as a failure of its host, which is benched as in a local
  run; errors no episode would survive (unknown model, bad key) stop the run.
- **Back-pressure.** An actor gets at most its share of the cluster's slots (by CPUs) in
  flight, and the episode goes to the actor least loaded for its share (`Slots`: O(log n)
  per episode, whatever the number of actors).
- **Batches.** Episodes travel in batches, both ways: an episode given to an actor goes
  with the others given to it in the same turn of the event loop when the actor has no
  call under way or its share is full, else after `BATCH_S` at most, and the call's answer
  brings back the actor's episodes finished by then (it waits for the first, then up to
  `LINGER_S` for more while others are in flight). One call is kept under way per actor
  while any of its episodes is out, and one more may carry new ones (`MAX_CALLS`). A Ray
  call costs the driver about a millisecond of CPU; tracegen's own work per episode about
  a third of that.
  The slots an answer frees go back to the actor it came from while it has room (each
  worker goes back to its last actor), so the episodes that take them leave together, in
  the call that collects its next answer, not each in a call of its own.
- **The wire.** A call's episodes go as one pickled blob, and its answer comes back as one:
  each trace already dumped on the actor as the run files hold it, so the driver reads it
  back once (pydantic, from JSON) and writes those bytes as they are, never dumping it
  again: Ray's serialiser sees one `bytes` each way. A trace the driver cannot read back
  (a node with another tracegen) stops the run with a `ClusterError` saying so.
- **Failures.** An actor or node that dies loses only its episodes in flight, sent or not
  (a call that fails takes with it whatever it was bringing back): they run again on
  another actor after a back-off (1 s, doubling), are not recorded as attempted and are
  never written twice; one lost `MAX_LOSSES` times is recorded as failed. A Ray error
  other than an actor's death is told once per kind, as Ray said it, and the actor is
  ended and replaced. An episode not back within its deadline (`DEADLINE_S`, or one model
  request's timeout plus one execution's if shorter; again each deadline after) has its
  actor asked whether it is alive; an actor that does not answer within `PROBE_S` (a
  stopped process, a wedged node whose raylet still looks healthy) is hung: it is ended
  and replaced, and its episodes run again elsewhere. Each episode is recorded once, by
  the worker that waits for it: once an actor is ended, its calls are cancelled and each of
  its episodes is lost exactly once, so whatever it might still send is never read. The
  driver dying is a kill -9 of a local run (Ray ends its actors); Ctrl-C cancels the
  episodes on the actors as it does local ones.
- **The terminal.** Ray's own notices of dead nodes and workers, which it prints in the
  driver, stay in Ray's logs; the summary counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import pickle
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracegen.config import GenerationSettings, RunSettings
from tracegen.episode.spec import Choices, EpisodeSpec
from tracegen.errors import BackendError, ClusterError, MissingExtraError, TracegenError
from tracegen.generate.executor import Executor
from tracegen.generate.slots import Slots
from tracegen.generate.worker import EpisodeWorker
from tracegen.jsonl import dumps
from tracegen.llm.base import HostBackend
from tracegen.llm.factory import backend_for
from tracegen.schema import Problem, Trace, TraceError

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
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
DEADLINE_S = 60.0
"""How long an episode may run before its actor is asked whether it is alive."""
PROBE_S = 10.0
"""How long an actor has to answer when one of its episodes is past its deadline."""
MAX_LOSSES = 5
"""How often an episode may be lost with its actor before it is recorded as failed."""
NO_ACTOR_S = 600.0
"""How long episodes wait for a live actor before the run stops."""
BATCH_S = 0.01
"""How long an episode given to an actor waits for others to go with it in one call (at
most: the call leaves as soon as the actor's share is full)."""
LINGER_S = 0.02
"""How long an actor holds a finished episode back for others to go with it (at most; not
when none is left in flight)."""
MAX_CALLS = 2
"""Calls under way per actor: one waiting for results, one more carrying new episodes."""
LOCAL_OBJECT_STORE = 256 << 20
"""The object store of a Ray instance tracegen starts itself (Ray's default is 30% of RAM)."""


@dataclass(frozen=True)
class RunParts:
    """What every episode of the run shares: sent to each actor once, when it starts."""

    settings: GenerationSettings
    system_prompt: str
    settings_hash: str
    choices: Choices = field(default_factory=Choices)
    backend: str | None = None
    """The backend kind the driver's pool found (None: the settings' own)."""


Item = tuple[Problem, int, str, int | None, str]
"""An episode as it travels to an actor: problem, sample, trace id, seed, host."""


@dataclass
class Result:
    """What an actor sends back for one episode, with its counters since its last result."""

    trace: Trace | None
    error: TracegenError | None
    """An error no episode would survive (unknown model, bad key, a broken setting)."""
    retries: int
    executions: int
    line: bytes | None = None
    """The trace as the run files hold it (`tracegen.jsonl.dumps`), as the actor wrote it."""


Wire = tuple[str, bytes | None, TracegenError | None, int, int]
"""A result as it travels back: trace id, the trace's JSON line, error, retries, executions."""


def encode_batch(batch: list[Item]) -> bytes:
    """Episodes as one call carries them to an actor."""
    return pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)


def decode_batch(blob: bytes) -> list[Item]:
    return list(pickle.loads(blob))


def encode_results(finished: list[tuple[str, Result]]) -> bytes:
    """An actor's finished episodes as one answer: each trace dumped once, here, as the run
    files will hold it."""
    wire: list[Wire] = [
        (
            trace_id,
            None if r.trace is None else dumps(r.trace.to_row()),
            r.error,
            r.retries,
            r.executions,
        )
        for trace_id, r in finished
    ]
    return pickle.dumps(wire, protocol=pickle.HIGHEST_PROTOCOL)


def decode_results(blob: bytes) -> list[tuple[str, Result]]:
    """`encode_results`' answer read back: each trace validated from its line, kept with it."""
    results = []
    for trace_id, line, error, retries, executions in pickle.loads(blob):
        trace = None
        if line is not None:
            try:
                trace = Trace.model_validate_json(line)
            except ValueError as e:  # a node whose tracegen writes traces this one cannot read
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                why = f"a Ray actor sent back a trace this tracegen cannot read ({first}): "
                error = ClusterError(why + "install the same tracegen on every node")
                line = None
        results.append((trace_id, Result(trace, error, retries, executions, line)))
    return results


class EpisodeActor:
    """Runs episodes on one node: a warm sandbox, a backend per host (see the module docstring)."""

    def __init__(self, settings: RunSettings, parts: RunParts, cpus: int) -> None:
        self.settings = settings
        self.parts = parts
        self.cpus = cpus
        self.backends: dict[str, HostBackend] = {}
        self.worker: EpisodeWorker | None = None
        self.retries = 0
        self.reported = (0, 0)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        """The episodes in flight, by trace id."""
        self.finished: list[tuple[str, Result]] = []
        """The episodes finished since the last answer, with their results."""
        self.ready = asyncio.Event()
        self.collecting = False
        """Whether a call is waiting for finished episodes (one at a time)."""

    async def start(self) -> tuple[str, str | None] | TracegenError:
        """Warm the sandbox: its isolation and warning, or the error that prevents it."""
        try:
            self.worker = await EpisodeWorker(self.settings, concurrency=self.cpus).open()
        except TracegenError as e:
            return e
        return self.worker.sandbox.isolation, self.worker.warning

    async def ping(self) -> None:
        """An answer, to show the actor's event loop is alive."""

    async def exchange(self, batch: bytes, linger: float) -> bytes:
        """Start ``batch`` (`encode_batch`); then the episodes finished since the last answer
        (`encode_results`; none when none is in flight), once there is one and either
        ``linger`` seconds have passed since or nothing else is in flight: one call carries
        many episodes each way. One call at a time waits for them: another one only brings
        new episodes."""
        return encode_results(await self._exchange(decode_batch(batch), linger))

    async def _exchange(self, batch: list[Item], linger: float) -> list[tuple[str, Result]]:
        for item in batch:
            task = asyncio.create_task(self._run(*item))
            self.tasks[item[2]] = task
        if self.collecting:  # the call under way brings them back
            return []
        self.collecting = True
        try:
            while True:
                while not self.finished:
                    if not self.tasks:
                        return []
                    self.ready.clear()
                    await self.ready.wait()
                if linger > 0 and self.tasks:
                    await asyncio.wait(list(self.tasks.values()), timeout=linger)
                if self.finished:
                    finished, self.finished = self.finished, []
                    return finished
        finally:
            self.collecting = False

    async def cancel(self, trace_ids: list[str]) -> None:
        """Cancel these episodes: nothing is sent back for them."""
        for trace_id in trace_ids:
            task = self.tasks.pop(trace_id, None)
            if task is not None:
                task.cancel()

    async def _run(
        self, problem: Problem, sample: int, trace_id: str, seed: int | None, host: str
    ) -> None:
        worker = self.worker
        assert worker is not None, "start the actor first"
        parts = self.parts
        spec = EpisodeSpec(
            problem=problem,
            sample=sample,
            trace_id=trace_id,
            settings=parts.settings,
            settings_hash=parts.settings_hash,
            system_prompt=parts.system_prompt,
            seed=seed,
            choices=parts.choices,
        )
        backend = self.backends.get(host)
        if backend is None:
            backend = self.backends[host] = backend_for(
                self.settings,
                host,
                kind=parts.backend,
                model=parts.settings.model,
                on_retry=self._retry,
            )
        trace: Trace | None = None
        error: TracegenError | None = None
        try:
            trace = await worker.run(spec, backend)
        except TracegenError as e:
            error = e
        retries, executions = self.retries, worker.executions
        result = Result(trace, error, retries - self.reported[0], executions - self.reported[1])
        self.reported = (retries, executions)
        if self.tasks.pop(trace_id, None) is not None:
            self.finished.append((trace_id, result))
            self.ready.set()

    async def stop(self) -> None:
        for backend in self.backends.values():
            await backend.aclose()
        if self.worker is not None:
            await self.worker.aclose()

    def _retry(self, message: str) -> None:
        self.retries += 1


_RemoteActor: Any = ray.remote(EpisodeActor)


@dataclass(eq=False)
class _Actor:
    handle: Any
    node: str
    address: str
    cpus: int
    number: int
    started_at: float = field(default_factory=time.time)
    episodes: int = 0
    alive: bool = True
    hung: bool = False
    probe: asyncio.Task[bool] | None = None
    outbox: list[Item] = field(default_factory=list)
    """Episodes given to this actor and not sent yet: they go with its next call."""
    waiting: dict[str, asyncio.Future[Result]] = field(default_factory=dict)
    """The episodes given to this actor and not back yet, by trace id."""
    calls: set[asyncio.Task[None]] = field(default_factory=set)
    """Its calls under way (`Actors.exchange`)."""

    def describe(self) -> str:
        """Which actor this is, apart from any other on its node: address, node, start."""
        started = datetime.fromtimestamp(self.started_at).strftime("%H:%M:%S")
        return f"{self.address} · node {self.node[:8]} · {self.cpus} CPUs · started {started}"


_last_actor: contextvars.ContextVar[_Actor | None] = contextvars.ContextVar(
    "tracegen_last_actor", default=None
)
"""The actor the current worker's last episode came back from (each worker is a task)."""


class _Lost(Exception):
    """The episode's actor (or its node) died, or hung: nothing came back."""


class _HostGaveUp(BackendError):
    """An episode the backend gave up on: a failure of its host, for the pool."""

    stops = "request"

    def __init__(self, trace: Trace) -> None:
        assert trace.error is not None
        super().__init__(trace.error.message)
        self.trace = trace


def eligible_nodes() -> list[dict[str, Any]]:
    """Live nodes offering `RESOURCE`, or every live node when none does (blocking)."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    tagged = [n for n in alive if n.get("Resources", {}).get(RESOURCE, 0) > 0]
    return tagged or alive


def ray_error(e: BaseException) -> str:
    """A Ray error as what it is, in a line: its kind, the first line of its message, and
    the error it carries when its last line names one (an actor's creation task that
    raised: ``ActorDiedError: … (TypeError: …)``)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    said = f"{type(e).__name__}: {lines[0]}"
    if len(lines) > 1 and re.match(r"[\w.]*(Error|Exception)\b", lines[-1]):
        said += f" ({lines[-1]})"
    return said


class Actors:
    """The actors, one live per eligible node, and the slots each may fill."""

    def __init__(
        self, settings: RunSettings, parts: RunParts, slots: int, warn: Callable[[str], None]
    ) -> None:
        self.settings = settings
        self.parts = parts
        self.warn = warn
        self.slots: Slots[_Actor] = Slots(slots)
        self.actors: list[_Actor] = []
        """Every actor started, live or not, in order."""
        self.live: dict[str, _Actor] = {}
        """The live actor of each node."""
        self.starting: dict[str, asyncio.Task[None]] = {}
        self.lost = 0
        self.calls = 0
        """Calls made to the actors with episodes (`_exchange`)."""
        self.returned = 0
        """Episodes those calls brought back."""
        self.deaths = 0
        self.hung = 0
        self.isolation = ""
        self.refused: dict[str, str] = {}
        """Nodes where an actor cannot start (a tracegen error: not retried), and why."""
        self.failed: dict[str, str] = {}
        """Nodes whose last start failed (a Ray error or a timeout: retried), and why."""
        self.ray_errors: set[str] = set()
        """The kinds of Ray error already told (each once)."""
        self._warned: set[str] = set()
        self._due: set[_Actor] = set()
        """Actors that may have a call to make (`_schedule`)."""
        self._flush: asyncio.TimerHandle | None = None
        self._full: set[_Actor] = set()
        """Actors whose call leaves at the next turn of the loop (its share is full, or no
        call of its is under way to wait for)."""
        self._soon: asyncio.Handle | None = None

    @property
    def alive(self) -> list[_Actor]:
        return list(self.live.values())

    async def refresh(self) -> None:
        """Start an actor on each eligible node with neither a live nor a starting one; each
        start goes on by itself (see `started`)."""
        for node in await asyncio.to_thread(eligible_nodes):
            node_id = node["NodeID"]
            if node_id in self.live or node_id in self.starting or node_id in self.refused:
                continue
            self.starting[node_id] = asyncio.create_task(self._start(node))

    async def started(self) -> None:
        """Until one actor is live, or no start is under way any more."""
        while not self.live and self.starting:
            await asyncio.wait(list(self.starting.values()), return_when=asyncio.FIRST_COMPLETED)

    async def _start(self, node: dict[str, Any]) -> None:
        node_id = node["NodeID"]
        address = str(node.get("NodeManagerAddress"))
        cpus = max(1, int(node.get("Resources", {}).get("CPU", 1)))
        handle: Any = None
        try:
            handle = _RemoteActor.options(
                num_cpus=0,
                max_concurrency=self.slots.slots + 16,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self.settings, self.parts, cpus)
            started = await asyncio.wait_for(_await(handle.start.remote()), START_TIMEOUT_S)
        except TimeoutError:
            self.failed[address] = f"did not start within {START_TIMEOUT_S:.0f}s"
        except Exception as e:  # a Ray error, or one of Ray's own checks: said as it is
            self.failed[address] = ray_error(e)
        except asyncio.CancelledError:
            _kill(handle)
            raise
        else:
            if isinstance(started, TracegenError):
                self.refused[node_id] = f"{address}: {started}"
                self.warn(f"{address}: {started}; no episodes run there")
            else:
                self.failed.pop(address, None)
                self.isolation, warning = started
                if warning and warning not in self._warned:
                    self._warned.add(warning)
                    self.warn(f"{address}: {warning}")
                self.join(_Actor(handle, node_id, address, cpus, len(self.actors) + 1))
                return
        finally:
            self.starting.pop(node_id, None)
        _kill(handle)

    def join(self, actor: _Actor) -> None:
        """A started actor takes episodes from now on."""
        self.actors.append(actor)
        self.live[actor.node] = actor
        self.slots.add(actor, actor.cpus)

    async def keep_up(self) -> None:
        """`refresh` every `REFRESH_S`, through a moment the cluster does not answer."""
        while True:
            await asyncio.sleep(REFRESH_S)
            with contextlib.suppress(Exception):  # Ray's, or its connection's: try again
                await self.refresh()

    async def acquire(self) -> _Actor:
        """The actor this worker's last episode came back from, while it has room and no
        call under way (the episodes that take the slots an answer freed then go together
        in the call that collects its next answer, not each in a call of its own); else the
        live actor least loaded for its share, once one has room."""
        last = _last_actor.get()
        if last is not None and last.alive and not last.calls and self.slots.take_from(last):
            return last
        waited_since = time.monotonic()
        while True:
            actor = self.slots.take()
            if actor is not None:
                return actor
            if not self.live and time.monotonic() - waited_since > NO_ACTOR_S:
                raise ClusterError(
                    f"no Ray node has run episodes for {NO_ACTOR_S:.0f}s (no live "
                    f"tracegen actor{self._why()}); once nodes are back, run the same "
                    "command to resume"
                )
            await self.slots.wait(REFRESH_S)

    def release(self, actor: _Actor) -> None:
        self.slots.give_back(actor)

    def send(self, actor: _Actor, item: Item) -> asyncio.Future[Result]:
        """Give ``actor`` an episode: it goes with the actor's next call, which leaves
        within `BATCH_S` or when a call comes back; its result is the future's, or `_Lost`
        when the actor dies or hangs before sending it."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        actor.waiting[item[2]] = future
        actor.outbox.append(item)
        if actor.alive and (
            not actor.calls or self.slots.in_flight(actor) >= self.slots.share(actor)
        ):
            # no call under way to wait for, or no more can come but those given in this
            # turn of the loop: it leaves then
            self._full.add(actor)
            if self._soon is None:
                self._soon = asyncio.get_running_loop().call_soon(self._flush_full)
        else:
            self._schedule(actor)
        return future

    def forget(self, actor: _Actor, trace_id: str) -> None:
        """The episode is no longer waited for (cancelled): the actor cancels it."""
        future = actor.waiting.pop(trace_id, None)
        if future is None:
            return
        future.cancel()
        unsent = [i for i in actor.outbox if i[2] != trace_id]
        if len(unsent) < len(actor.outbox):
            actor.outbox = unsent
        elif actor.alive:
            _cancel_on(actor.handle, trace_id)

    def _schedule(self, actor: _Actor) -> None:
        """``actor`` may have a call to make: within `BATCH_S` (one timer for all actors)."""
        if actor.alive:
            self._due.add(actor)
            if self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(BATCH_S, self._flush_due)

    def _flush_due(self) -> None:
        """Each due actor sends what waits in its outbox, and keeps a call under way while
        any of its episodes is out (the call's answer brings them back)."""
        self._flush = None
        due, self._due = self._due, set()
        for actor in due:
            if not actor.alive:
                continue
            self._call(actor)

    def _flush_full(self) -> None:
        self._soon = None
        full, self._full = self._full, set()
        for actor in full:
            if actor.alive:
                self._call(actor)

    def _call(self, actor: _Actor) -> None:
        if (actor.outbox and len(actor.calls) < MAX_CALLS) or (actor.waiting and not actor.calls):
            batch, actor.outbox = actor.outbox, []
            self.calls += 1
            call = asyncio.create_task(self._exchange(actor, batch))
            actor.calls.add(call)
            call.add_done_callback(actor.calls.discard)
        elif actor.outbox:  # both calls under way: again once one is back
            self._schedule(actor)

    async def _exchange(self, actor: _Actor, batch: list[Item]) -> None:
        try:
            answer = await _await(actor.handle.exchange.remote(encode_batch(batch), LINGER_S))
        except RayActorError:
            self.died(actor)
            return
        except RayError as e:  # what came back with this call is lost: so is the actor
            kind = type(e).__name__
            if kind not in self.ray_errors:
                self.ray_errors.add(kind)
                self.warn(f"{actor.address}: {ray_error(e)}; its episodes run again")
            self.died(actor)
            return
        finally:  # not left to the done callback: a call may be due before it runs
            task = asyncio.current_task()
            if task is not None:
                actor.calls.discard(task)
        finished = decode_results(answer)
        self.returned += len(finished)
        for trace_id, result in finished:
            future = actor.waiting.pop(trace_id, None)
            if future is not None and not future.done():
                future.set_result(result)
        self._schedule(actor)

    async def answers(self, actor: _Actor) -> bool:
        """Whether ``actor`` answers a ping within `PROBE_S` (one ping at a time per actor)."""
        if actor.probe is None or actor.probe.done():
            actor.probe = asyncio.create_task(self._ping(actor))
        return await asyncio.shield(actor.probe)

    @staticmethod
    async def _ping(actor: _Actor) -> bool:
        try:
            await asyncio.wait_for(_await(actor.handle.ping.remote()), PROBE_S)
        except (TimeoutError, GetTimeoutError):
            return False
        except RayError:
            return False
        return True

    def died(self, actor: _Actor, *, hung: bool = False) -> None:
        if actor.alive:
            actor.alive = False
            actor.hung = hung
            self.deaths += 1
            self.hung += hung
            if self.live.get(actor.node) is actor:
                del self.live[actor.node]
            self.slots.remove(actor)
            _kill(actor.handle)
            self._due.discard(actor)
            self._full.discard(actor)
            for call in list(actor.calls):
                if call is not asyncio.current_task():
                    call.cancel()
            waiting, actor.waiting, actor.outbox = actor.waiting, {}, []
            for future in waiting.values():  # each is lost once, whatever comes later
                if not future.done():
                    future.set_exception(_Lost())

    async def stop(self) -> None:
        """Cancel the starts; close the actors' sandboxes and clients, then end them."""
        for task in list(self.starting.values()):
            task.cancel()
        await asyncio.gather(*self.starting.values(), return_exceptions=True)
        alive = self.alive
        if self._flush is not None:
            self._flush.cancel()
        if self._soon is not None:
            self._soon.cancel()
        for actor in alive:
            for call in list(actor.calls):
                call.cancel()
        stops = [_await(a.handle.stop.remote()) for a in alive]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*stops, return_exceptions=True), 10)
        for actor in alive:
            _kill(actor.handle)

    def detail(self) -> str:
        starting = f" (+{len(self.starting)} starting)" if self.starting else ""
        return f"actors {len(self.live)}{starting}"

    def _why(self) -> str:
        reasons = [*self.refused.values(), *(f"{a}: {w}" for a, w in self.failed.items())]
        return f": {'; '.join(reasons[:3])}" if reasons else ""


def _kill(handle: Any) -> None:
    if handle is not None and ray.is_initialized():  # ray.kill would start a Ray otherwise
        with contextlib.suppress(RayError, ValueError):
            ray.kill(handle, no_restart=True)


async def _await(ref: Any) -> Any:
    """An `ObjectRef`'s value; a cancelled wait cancels the task on its actor."""
    try:
        return await ref
    except asyncio.CancelledError:
        _cancel(ref)
        raise


def _cancel_on(handle: Any, trace_id: str) -> None:
    if ray.is_initialized():
        with contextlib.suppress(RayError):
            handle.cancel.remote([trace_id])


def _cancel(ref: Any) -> None:
    if ray.is_initialized():  # ray.cancel would start a Ray otherwise
        with contextlib.suppress(RayError, TypeError):
            ray.cancel(ref)


class RayExecutor(Executor):
    """Runs a plan's remaining episodes on Ray actors; see the module docstring."""

    unit = "episodes"
    in_process = False
    actors: Actors
    notices_before = 0
    _keeper: asyncio.Task[None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lines: dict[str, tuple[Trace, bytes]] = {}
        """The line each trace back from an actor came as, until it is recorded."""

    @property
    def deadline_s(self) -> float:
        """How long an episode runs before its actor must show it is alive (and again each
        time as long after): `DEADLINE_S`, or one model request's timeout plus one
        execution's when that is shorter."""
        return min(DEADLINE_S, self.settings.request_timeout_s + self.settings.exec_timeout)

    async def open(self) -> str:
        _connect(self.settings.ray_address)
        self.notices_before = NOTICES.count
        plan = self.plan
        parts = RunParts(
            plan.settings, plan.system_prompt, plan.settings_hash, plan.choices, self.pool.kind
        )
        slots = self.settings.concurrency * len(self.settings.hosts)
        self.actors = Actors(self.settings, parts, slots, self.reporter.warn)
        try:
            await self.actors.refresh()
            if not self.actors.starting:
                raise ClusterError("no live Ray node to start a tracegen actor on")
            await self.actors.started()
            if not self.actors.alive:
                raise ClusterError(f"no Ray node could start a tracegen actor{self.actors._why()}")
        except BaseException:
            await self.close()
            raise
        self._keeper = asyncio.create_task(self.actors.keep_up())
        self.reporter.detail = self.actors.detail
        starting = len(self.actors.starting)
        more = f" ({starting} more starting)" if starting else ""
        return (
            f"Ray: {len(self.actors.alive)} actor(s){more}, one per node, sandbox "
            f"{self.actors.isolation}"
        )

    async def close(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
        if hasattr(self, "actors"):
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

    @staticmethod
    def item(spec: EpisodeSpec, host: str) -> Item:
        """The episode as it travels: what is not the run's fixed parts."""
        return (spec.problem, spec.sample, spec.trace_id, spec.seed, host)

    async def _on_actor(self, spec: EpisodeSpec, host: str) -> Trace:
        actor = await self.actors.acquire()
        try:
            result = await self._result(actor, spec.trace_id, self.item(spec, host))
        finally:
            self.actors.release(actor)
        _last_actor.set(actor)
        actor.episodes += 1
        self.stats.retries += result.retries
        self.stats.executions += result.executions
        if result.error is not None:
            raise result.error
        assert result.trace is not None
        if result.line is not None:
            self._lines[result.trace.id] = (result.trace, result.line)
        error = result.trace.error
        if error is not None and error.kind == "backend":
            raise _HostGaveUp(result.trace)
        return result.trace

    async def _result(self, actor: _Actor, trace_id: str, item: Item) -> Result:
        """What ``actor`` sends back for the episode; past each deadline, the actor must
        answer a ping, else it is hung and the episode `_Lost` (a late result is never
        read)."""
        future = self.actors.send(actor, item)
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=self.deadline_s)
                if done:
                    return future.result()
                if actor.alive and not await self.actors.answers(actor):
                    self.actors.died(actor, hung=True)
                self.actors._schedule(actor)  # alive: whatever waits to be sent goes
                if not actor.alive:
                    if future.done():
                        return future.result()  # _Lost, or what came back just before
                    raise _Lost
        except asyncio.CancelledError:
            self.actors.forget(actor, trace_id)
            raise

    def line_of(self, trace: Trace) -> bytes | None:
        """The line ``trace`` came back as from its actor (only for that very trace)."""
        kept = self._lines.pop(trace.id, None)
        return kept[1] if kept is not None and kept[0] is trace else None

    def summary_rows(self) -> list[tuple[str, str]]:
        a = self.actors
        hung = f" ({a.hung} hung)" if a.hung else ""
        rows = [
            (
                "Ray actors",
                f"{len(a.actors)} started, {a.deaths} died{hung}; {a.lost} episodes lost with "
                f"an actor (run again); {a.calls} calls, {a.returned / max(1, a.calls):.1f} "
                "episodes back per call",
            )
        ]
        for x in a.actors:
            state = "" if x.alive else (", hung" if x.hung else ", died")
            rows.append((f"actor #{x.number}", f"{x.describe()} · {x.episodes} episodes{state}"))
        notices = NOTICES.count - self.notices_before
        if notices:
            rows.append(("Ray notices", f"{notices} (dead nodes or workers; in Ray's logs)"))
        return rows


def _connect(address: str | None) -> None:
    """Join the cluster at ``address`` (``auto``, HOST:PORT, or RAY_ADDRESS), or start a local
    Ray with a small object store when neither is given. Ray's notices of dead nodes and
    workers go to `NOTICES` rather than the terminal, as do its complaints about results
    nobody read (an episode given up on its hung actor)."""
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    _keep_notices()
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


@dataclass
class RayNotices:
    """The error notices Ray's driver would have printed (see `_keep_notices`)."""

    count: int = 0
    last: deque[str] = field(default_factory=lambda: deque(maxlen=20))


NOTICES = RayNotices()


def _keep_notices() -> None:
    """Ray's driver prints the cluster's error notices (a node or worker died: dozens of
    lines each) on stdout from a thread of its own, whatever ``log_to_driver`` says
    (``ray._private.worker.listen_error_messages``, Ray 2.60); they are also in the logs of
    the raylet and GCS that sent them. Keep them out of tracegen's terminal: counted in
    `NOTICES`, the last few kept."""
    try:
        from ray._private import worker
    except ImportError:
        return
    show = getattr(worker, "print_to_stdstream", None)
    if show is None or getattr(show, "_tracegen", False):
        return

    def keep(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            NOTICES.count += 1
            NOTICES.last.extend(str(line) for line in data.get("lines", ()))
            return
        show(data, ignore_prefix)

    keep._tracegen = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = keep
