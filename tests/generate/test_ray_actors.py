"""How the Ray executor starts its actors, with stand-in handles in place of Ray's (no Ray
instance): each node's start goes on by itself, and a failure is reported as what it was."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from ray.exceptions import RaySystemError  # noqa: E402

from tracegen.config import RunSettings  # noqa: E402
from tracegen.generate import ray_executor  # noqa: E402
from tracegen.jsonl import dumps  # noqa: E402
from tracegen.schema import Trace  # noqa: E402


class StandInActor:
    """What `_RemoteActor.options(...).remote(...)` returns: ``start`` answers per node."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.start = self.ping = self.stop = self

    def remote(self) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if isinstance(self.answer, BaseException):
            future.set_exception(self.answer)
        elif self.answer is not None:  # None: a start that never ends
            future.set_result(self.answer)
        return future


def nodes(*names: str) -> list[dict[str, Any]]:
    return [
        {"NodeID": name * 56, "NodeManagerAddress": f"10.0.0.{i}", "Resources": {"CPU": 2}}
        for i, name in enumerate(names, 1)
    ]


def stand_in(monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any]) -> ray_executor.Actors:
    class Remote:
        @staticmethod
        def options(scheduling_strategy: Any, **_: Any) -> Any:
            node = scheduling_strategy.node_id

            class Make:
                @staticmethod
                def remote(*_: Any) -> StandInActor:
                    return StandInActor(answers[node])

            return Make

    monkeypatch.setattr(ray_executor, "_RemoteActor", Remote)
    monkeypatch.setattr(ray_executor, "eligible_nodes", lambda: nodes(*(n[0] for n in answers)))
    parts = ray_executor.RunParts(RunSettings().generation(), "system", "hash")
    return ray_executor.Actors(RunSettings(), parts, slots=4, warn=lambda line: None)


def test_a_node_whose_actor_is_slow_to_start_holds_up_no_other(monkeypatch):
    actors = stand_in(monkeypatch, {"a" * 56: None, "b" * 56: ("builtin", None)})

    async def scenario() -> tuple[list[str], list[str]]:
        await actors.refresh()
        await asyncio.wait_for(actors.started(), 5)  # not START_TIMEOUT_S
        live = [a.address for a in actors.alive]
        starting = sorted(actors.starting)
        await actors.stop()
        return live, starting

    live, starting = asyncio.run(scenario())
    assert live == ["10.0.0.2"]
    assert starting == ["a" * 56]  # still starting on its own
    assert not ray.is_initialized()  # stand-ins only: no Ray was started


def test_a_ray_error_at_start_is_reported_as_what_it_was(monkeypatch):
    error = RaySystemError("the worker could not register: connection reset")
    actors = stand_in(monkeypatch, {"a" * 56: error})

    async def scenario() -> None:
        await actors.refresh()
        await asyncio.wait_for(actors.started(), 5)

    asyncio.run(scenario())
    assert not actors.alive
    assert actors.failed == {
        "10.0.0.1": "RaySystemError: System error: the worker could not register: connection reset"
    }


def test_an_actor_that_failed_to_start_is_said_with_the_error_it_carried():
    message = (
        "The actor died because of an error raised in its creation task, "
        "ray::EpisodeActor.__init__() (pid=7002, ip=10.0.0.7)\n"
        '  File "cluster.py", line 80, in __init__\n'
        "TypeError: __init__() takes 3 positional arguments but 4 were given\n"
    )
    said = ray_executor.ray_error(ray.exceptions.RayActorError(error_msg=message))
    assert said.startswith("RayActorError: The actor died because of an error raised")
    assert said.endswith("(TypeError: __init__() takes 3 positional arguments but 4 were given)")


class StandInEpisodes:
    """An actor's ``exchange``, ``ping`` and ``cancel`` without Ray: the batches it was sent,
    each answered at once with a ``markers`` trace per episode, or failed a moment later
    with the Ray error ``fails``, or (``hangs``) never answered."""

    def __init__(
        self, fails: BaseException | None = None, hangs: bool = False, delay: float = 0.0
    ) -> None:
        self.fails, self.hangs, self.delay = fails, hangs, delay
        self.batches: list[list[str]] = []
        self.lines: list[bytes] = []
        """Each trace as it was sent back, dumped."""
        self.exchange, self.ping, self.cancel = self, Ping(hangs), Ping(False)

    def remote(self, blob: bytes, linger: float) -> asyncio.Future[Any]:
        from tests.support.traces import markers_trace

        batch = ray_executor.decode_batch(blob)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if batch:
            self.batches.append([item[2] for item in batch])
        if self.hangs:
            return future
        if self.fails is not None:
            loop.call_later(0.05, _fail, future, self.fails)
            return future
        results = []
        for problem, sample, trace_id, _seed, _host in batch:
            trace = markers_trace(sample, problem_id=problem.id).model_copy(update={"id": trace_id})
            results.append((trace_id, ray_executor.Result(trace, None, 0, 1)))
        answer = ray_executor.encode_results(results)
        self.lines += [line for _, line, *_ in pickle.loads(answer)]
        if self.delay:
            loop.call_later(self.delay, future.set_result, answer)
        else:
            future.set_result(answer)
        return future


class Ping:
    def __init__(self, hangs: bool) -> None:
        self.hangs = hangs

    def remote(self, *_: Any) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.hangs:
            future.set_result(None)
        return future


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def run_on_stand_ins(tmp_path, actors: list[StandInEpisodes], episodes: int, **settings: Any):
    """A whole run through `RayExecutor.execute` on stand-in actors (1 CPU each): the
    executor, with what it wrote."""
    from tests.support.ray_stand_ins import StandInExecutor, stand_in_executor, stand_in_plan

    run, plan = stand_in_plan(
        tmp_path / "problems.jsonl",
        episodes,
        concurrency=settings.pop("concurrency", 2 * len(actors)),
        output=tmp_path / "traces.jsonl",
        **settings,
    )

    class StandIns(StandInExecutor):
        def stand_ins(self) -> list[ray_executor._Actor]:
            return [
                ray_executor._Actor(handle, str(n) * 56, f"10.0.0.{n}", 1, n)
                for n, handle in enumerate(actors, 1)
            ]

    async def scenario() -> StandInExecutor:
        async with stand_in_executor(StandIns, run, plan) as executor:
            assert await asyncio.wait_for(executor.execute(), 60) == 0
        return executor

    return asyncio.run(scenario())


def recorded(tmp_path) -> list[tuple[str, int]]:
    from tests.support.runs import keys

    return sorted(keys(tmp_path / "traces.jsonl"))


def test_a_batch_lost_with_a_dying_actor_runs_again_elsewhere_each_episode_once(tmp_path):
    dying, living = StandInEpisodes(fails=ray.exceptions.RayActorError()), StandInEpisodes()
    executor = run_on_stand_ins(tmp_path, [dying, living], episodes=10)
    assert recorded(tmp_path) == sorted((f"p{i}", 0) for i in range(10))
    (batch,) = dying.batches  # its share went in one call, lost with it
    assert len(batch) == 2
    assert executor.actors.deaths == 1 and executor.actors.lost == len(batch)
    assert set(batch) <= {i for b in living.batches for i in b}  # run again on the other
    assert max(len(b) for b in living.batches) > 1  # episodes went in batches
    assert sum(len(b) for b in living.batches) == 10


def test_a_hung_actors_batch_runs_again_elsewhere_and_its_late_answer_is_never_read(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(ray_executor, "PROBE_S", 0.1)
    hung, living = StandInEpisodes(hangs=True), StandInEpisodes()
    # the deadline: one model request's timeout plus one execution's
    executor = run_on_stand_ins(
        tmp_path, [hung, living], episodes=6, request_timeout_s=0.2, exec_timeout=0.1
    )
    assert recorded(tmp_path) == sorted((f"p{i}", 0) for i in range(6))
    (batch,) = hung.batches
    assert executor.actors.hung == 1 and executor.actors.lost == len(batch) == 2
    assert not executor.actors.actors[0].waiting  # nothing left to read what it might send


def test_a_call_failing_with_another_ray_error_is_told_as_it_was_and_its_batch_runs_again(
    tmp_path, capsys
):
    error = RaySystemError("the object's owner is gone")
    failing, living = StandInEpisodes(fails=error), StandInEpisodes()
    executor = run_on_stand_ins(tmp_path, [failing, living], episodes=8)
    assert recorded(tmp_path) == sorted((f"p{i}", 0) for i in range(8))
    assert executor.actors.deaths == 1 and executor.actors.lost == 2  # ended, not reused
    said = [line for line in capsys.readouterr().out.splitlines() if "RaySystemError" in line]
    assert said == [
        "10.0.0.1: RaySystemError: System error: the object's owner is gone; its episodes run again"
    ]


def test_every_episode_comes_back_when_actors_answer_at_once(tmp_path):
    """A call that is over may still count as under way for a moment: an episode given to
    its actor then must still be sent (it was left waiting for ever)."""
    actors = [StandInEpisodes() for _ in range(4)]
    run_on_stand_ins(tmp_path, actors, episodes=600)
    assert recorded(tmp_path) == sorted((f"p{i}", 0) for i in range(600))


def test_episodes_freed_by_one_answer_go_back_in_one_call_and_are_written_as_sent(tmp_path):
    """An answer frees its episodes' slots: the episodes that take them leave together in
    the next call, not one call each. Each trace is written as the actor dumped it: the
    bytes a local run writes for it."""
    actor = StandInEpisodes()
    run_on_stand_ins(tmp_path, [actor], episodes=12)
    assert [len(b) for b in actor.batches] == [2] * 6  # its share of 2, each time
    written = (tmp_path / "traces.jsonl").read_bytes().splitlines(keepends=True)
    assert sorted(written) == sorted(actor.lines)
    for line in written:
        assert line == dumps(Trace.model_validate_json(line).to_row())


def test_the_slots_an_answer_frees_go_back_to_its_actor_in_one_call(tmp_path):
    """Each answer frees its actor's slots; the episodes that take them go back to that
    actor, all in the call that collects its next answer: never a call per episode."""
    quick, slow = StandInEpisodes(), StandInEpisodes(delay=0.05)
    # shares of 2 and 2 for 3 slots: least loaded alone, a slot freed on the quick actor
    # would often go to the slow one, in a call of its own while its answer is awaited
    run_on_stand_ins(tmp_path, [quick, slow], episodes=40, concurrency=3)
    assert recorded(tmp_path) == sorted((f"p{i}", 0) for i in range(40))
    assert [len(b) for b in quick.batches[:-1]] == [2] * (len(quick.batches) - 1)
    assert sum(map(len, quick.batches + slow.batches)) == 40


def test_a_trace_the_driver_cannot_read_back_is_an_error_naming_the_cause():
    """A node with another tracegen may send a trace this one cannot read: the run stops
    with one line saying so, rather than waiting for an answer it already has."""
    from tests.support.traces import markers_trace

    good = markers_trace(0)
    row = good.to_json()
    row["schema"] = "tracegen.trace/9"
    wire = [("a", dumps(good.to_row()), None, 0, 1), ("b", dumps(row), None, 0, 1)]
    (_, kept), (_, unread) = ray_executor.decode_results(pickle.dumps(wire))
    assert kept.trace == good and kept.error is None and kept.line == wire[0][1]
    assert unread.trace is None and unread.line is None
    assert isinstance(unread.error, ray_executor.ClusterError)
    assert "install the same tracegen on every node" in str(unread.error)
