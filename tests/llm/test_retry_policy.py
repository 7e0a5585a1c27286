"""The retry policy of model requests: what it retries, how often, how long it waits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tracegen.errors import AuthError, BackendError, Overloaded, ServerError
from tracegen.llm.retries import RetryPolicy


def failing(*errors: BackendError) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """An attempt that raises ``errors`` in turn, then answers ``"ok"``; and its call count."""
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    return attempt, calls


def quick(attempts: int = 3, on_retry: Callable[[str], None] | None = None) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_s=0.001, max_s=0.01, on_retry=on_retry)


def test_a_failure_it_retries_is_counted_as_the_first_attempt() -> None:
    told: list[str] = []
    attempt, calls = failing(ServerError("boom"))
    assert asyncio.run(quick(on_retry=told.append).call(attempt)) == "ok"
    assert len(calls) == 2
    assert len(told) == 1 and told[0].startswith("boom (attempt 1 of 3); retrying in")


def test_retry_after_is_the_wait_capped_at_the_longest() -> None:
    told: list[str] = []
    busy = Overloaded("busy")
    busy.retry_after = 5.0
    attempt, _ = failing(busy)
    policy = RetryPolicy(attempts=2, max_s=0.02, on_retry=told.append)
    assert asyncio.run(policy.call(attempt)) == "ok"
    assert told == ["busy (attempt 1 of 2); retrying in 0.0s"]


def test_gives_up_after_its_attempts_with_the_last_error() -> None:
    attempt, calls = failing(*(ServerError(f"boom {i}") for i in range(5)))
    with pytest.raises(ServerError, match="boom 2"):
        asyncio.run(quick().call(attempt))
    assert len(calls) == 3


@pytest.mark.parametrize("policy", [quick(), quick(attempts=1)], ids=["run-stopping", "one try"])
def test_tries_once_what_it_does_not_retry(policy: RetryPolicy) -> None:
    error = AuthError("rejected") if policy.attempts > 1 else ServerError("boom")
    attempt, calls = failing(error)
    with pytest.raises(type(error)):
        asyncio.run(policy.call(attempt))
    assert len(calls) == 1


def test_stops_once_the_waits_add_up_to_its_limit() -> None:
    attempt, calls = failing(*(ServerError("boom") for _ in range(1000)))
    policy = RetryPolicy(attempts=1000, max_waiting_s=0.05, initial_s=0.02, max_s=0.02)
    with pytest.raises(ServerError):
        asyncio.run(policy.call(attempt))
    assert 2 <= len(calls) < 20


def test_no_try_starts_once_the_outage_window_has_passed() -> None:
    """A try as long as the window (a server trickling its answer until the request's
    timeout) is not tried again: the host has failed for the whole window."""

    async def slow_failure() -> str:
        calls.append(1)
        await asyncio.sleep(0.05)
        raise ServerError("did not answer within 0.05s")

    calls: list[int] = []
    policy = RetryPolicy(attempts=5, initial_s=0.001, max_s=0.01, max_elapsed_s=0.05)
    with pytest.raises(ServerError):
        asyncio.run(policy.call(slow_failure))
    assert len(calls) == 1
    calls.clear()
    within = RetryPolicy(attempts=5, initial_s=0.001, max_s=0.01, max_elapsed_s=0.12)
    with pytest.raises(ServerError):
        asyncio.run(within.call(slow_failure))
    assert 2 <= len(calls) < 5
