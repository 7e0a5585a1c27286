"""How the Ray executor spreads episodes over its actors: each actor's share of the slots by
CPUs, the least loaded for its share first, waiters woken one per freed slot."""

from __future__ import annotations

import asyncio
from collections import Counter

from tracegen.generate.slots import Slots


def test_each_worker_gets_its_share_of_the_slots_by_cpus_and_never_more():
    slots: Slots[str] = Slots(12)
    slots.add("big", 4)
    slots.add("small", 2)
    taken = Counter(slots.take() for _ in range(12))
    assert taken == {"big": 8, "small": 4}
    assert slots.take() is None  # every share is full


def test_the_least_loaded_worker_for_its_share_takes_the_next_episode():
    slots: Slots[str] = Slots(9)
    for name in "abc":
        slots.add(name, 1)
    first = [slots.take() for _ in range(3)]
    assert sorted(first) == ["a", "b", "c"]  # one each before anyone takes a second
    slots.give_back("b")
    assert slots.take() == "b"


def test_a_worker_that_leaves_gives_its_share_to_the_others():
    slots: Slots[str] = Slots(4)
    slots.add("a", 1)
    slots.add("b", 1)
    assert slots.share("a") == 2
    slots.remove("b")
    assert slots.share("a") == 4
    assert Counter(slots.take() for _ in range(5)) == {"a": 4, None: 1}
    slots.give_back("b")  # an episode of the worker that left comes back: nothing to do


def test_a_waiter_is_woken_by_a_freed_slot_or_a_worker_joining():
    async def scenario() -> list[str | None]:
        slots: Slots[str] = Slots(1)
        slots.add("a", 1)
        assert slots.take() == "a"

        async def wait_and_take() -> str | None:
            await slots.wait(5)
            return slots.take()

        waiting = asyncio.create_task(wait_and_take())
        await asyncio.sleep(0)
        slots.give_back("a")
        freed = await asyncio.wait_for(waiting, 1)
        waiting = asyncio.create_task(wait_and_take())
        await asyncio.sleep(0)
        slots.add("b", 1)
        joined = await asyncio.wait_for(waiting, 1)
        return [freed, joined]

    assert asyncio.run(scenario()) == ["a", "b"]


def test_choosing_stays_even_over_many_workers_and_episodes():
    slots: Slots[int] = Slots(1000)
    for i in range(1000):
        slots.add(i, 1)
    for _ in range(20_000):  # take and give back: the heap stays small, the load even
        worker = slots.take()
        assert worker is not None
        slots.give_back(worker)
    held = [slots.take() for _ in range(1000)]
    assert sorted(held) == list(range(1000))  # type: ignore[type-var]


def test_a_slot_is_taken_on_a_given_worker_only_within_its_share():
    slots: Slots[str] = Slots(4)
    slots.add("a", 1)
    slots.add("b", 1)
    assert slots.take_from("a") and slots.take_from("a")
    assert not slots.take_from("a")  # its share of 2 is full
    assert not slots.take_from("gone")
    assert [slots.take(), slots.take(), slots.take()] == ["b", "b", None]
    slots.give_back("a")
    assert slots.take_from("a") and slots.in_flight("a") == 2
