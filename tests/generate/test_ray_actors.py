"""How the Ray executor starts its actors, with stand-in handles in place of Ray's (no Ray
instance): each node's start goes on by itself, and a failure is reported as what it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from ray.exceptions import RaySystemError  # noqa: E402

from tracegen.config import RunSettings  # noqa: E402
from tracegen.generate import ray_executor  # noqa: E402


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
