"""HostPool: requests spread over hosts, failing hosts benched, outages reported."""

from __future__ import annotations

import asyncio
import contextvars
import socket
from collections.abc import Coroutine
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Fault
from tracegen.errors import (
    BackendError,
    BackendUnavailable,
    ModelNotFound,
    ServerError,
    UnreadableServer,
)
from tracegen.llm.base import ChatRequest, Completion
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.pool import HostPool
from tracegen.schema import ChatMessage

REQUEST = ChatRequest(messages=[ChatMessage(role="user", content="hi")])


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def new_caller(request: Coroutine[Any, Any, Completion]) -> asyncio.Task[Completion]:
    """Send a request as a caller with no previous host."""
    return asyncio.create_task(request, context=contextvars.Context())


def backend(url: str, model: str = "test-model") -> OllamaBackend:
    return OllamaBackend(url, model, max_attempts=1, timeout_s=5)


async def test_requests_spread_over_hosts_up_to_the_per_host_limit():
    with FakeOllama(latency_s=0.2) as a, FakeOllama(latency_s=0.2) as b:
        pool = HostPool([backend(a.url), backend(b.url)], limit=3)
        completions = await asyncio.gather(*(pool.chat(REQUEST) for _ in range(12)))
        await pool.aclose()
        assert {c.host for c in completions} == {a.url, b.url}
    assert a.max_in_flight == 3
    assert b.max_in_flight == 3
    assert sum(h.served for h in pool.hosts) == 12
    assert min(h.served for h in pool.hosts) >= 3
    assert pool.completion_tokens == sum(c.completion_tokens for c in completions) > 0


async def test_a_caller_keeps_to_the_host_that_served_it_when_loads_tie():
    with FakeOllama(latency_s=0.3) as a, FakeOllama() as b:
        pool = HostPool([backend(a.url), backend(b.url)], limit=2)

        async def episode() -> list[str]:
            first = await pool.chat(REQUEST)
            await asyncio.sleep(0.4)
            second = await pool.chat(REQUEST)
            return [first.host, second.host]

        busy = asyncio.create_task(pool.chat(REQUEST))
        await asyncio.sleep(0)
        hosts = await asyncio.create_task(episode())
        assert (await busy).host == a.url
        await pool.aclose()
        assert hosts == [b.url, b.url]


async def test_failing_host_is_benched_and_requests_go_to_the_other():
    with FakeOllama() as good:
        bad = dead_url()
        pool = HostPool([backend(bad), backend(good.url)], limit=1, failures_to_bench=2)
        for _ in range(6):
            completion = await new_caller(pool.chat(REQUEST))
            assert completion.host == good.url
        await pool.aclose()
    bad_state, good_state = pool.hosts
    assert bad_state.failures == 2
    assert bad_state.times_benched == 1
    assert good_state.served == 6


async def test_a_server_error_is_retried_on_another_host():
    with FakeOllama() as a, FakeOllama() as b:
        pool = HostPool([backend(a.url), backend(b.url)], limit=1)
        a.fail_next(Fault("status", status=500))
        completion = await pool.chat(REQUEST)
        a.fail_next(Fault("status", status=500))
        b.fail_next(Fault("status", status=500))
        with pytest.raises(ServerError):
            await pool.chat(REQUEST)
        await pool.aclose()
        assert completion.host == b.url
    assert [h.failures for h in pool.hosts] == [2, 1]


async def test_model_not_found_is_not_retried_elsewhere():
    with FakeOllama() as a, FakeOllama() as b:
        pool = HostPool([backend(a.url, "nope"), backend(b.url, "nope")], limit=1)
        with pytest.raises(ModelNotFound):
            await pool.chat(REQUEST)
        await pool.aclose()
    assert len(a.requests) + len(b.requests) == 1
    assert [h.failures for h in pool.hosts] == [0, 0]


async def test_benched_host_returns_after_its_bench():
    with FakeOllama() as server:
        pool = HostPool([backend(server.url)], limit=1, failures_to_bench=1, bench_s=0.2)
        server.fail_next(Fault("status", status=503))
        with pytest.raises(Exception, match="busy"):
            await pool.chat(REQUEST)
        assert pool.hosts[0].benched_until > 0
        completion = await pool.chat(REQUEST)
        await pool.aclose()
        assert completion.host == server.url


async def test_every_host_down_for_too_long_is_an_outage():
    pool = HostPool(
        [backend(dead_url())],
        limit=1,
        failures_to_bench=1,
        bench_s=0.05,
        max_bench_s=0.1,
        max_outage_s=0.3,
    )
    errors = []
    while pool.outage is None and len(errors) < 50:
        with pytest.raises(BackendUnavailable) as e:
            await pool.chat(REQUEST)
        errors.append(str(e.value))
    await pool.aclose()
    assert errors[-1].startswith("no host has answered for 0.3s")
    assert len(errors) > 1


async def test_requests_failing_together_bench_their_host_once():
    now = [100.0]
    with FakeOllama(latency_s=0.2) as server:
        server.fail_next(*(Fault("status", status=500) for _ in range(6)))
        pool = HostPool([backend(server.url)], limit=6, bench_s=5, clock=lambda: now[0])
        calls = [new_caller(pool.chat(REQUEST)) for _ in range(6)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        await pool.aclose()
    assert all(isinstance(r, ServerError) for r in results)
    (host,) = pool.hosts
    assert host.failures == 6
    assert host.times_benched == 1
    assert host.benched_until == 105.0


def twice_unreadable(url: str) -> OllamaBackend:
    return OllamaBackend(url, "test-model", max_attempts=2, retry_initial_s=0.001, timeout_s=5)


async def test_a_host_that_answers_what_cannot_be_read_is_left_and_its_request_sent_elsewhere():
    with FakeOllama() as bad, FakeOllama() as good:
        bad.fail_randomly(1.0, [Fault("wire", message="event-stream")], seed=1)
        pool = HostPool([twice_unreadable(bad.url), twice_unreadable(good.url)], limit=1)
        hosts = []
        for _ in range(6):
            hosts.append((await new_caller(pool.chat(REQUEST))).host)
        await pool.aclose()
        asked_bad = sum(bad.faults_injected.values())
        assert hosts.count(good.url) == 6
    assert pool.outage is None
    assert asked_bad <= 4  # two requests answered the same unreadable way twice, then no more
    assert pool.hosts[0].benched_until == float("inf")


async def test_every_host_answering_what_cannot_be_read_is_an_outage_at_once():
    with FakeOllama() as a, FakeOllama() as b:
        for server in (a, b):
            server.fail_randomly(1.0, [Fault("wire", message="event-stream")], seed=1)
        pool = HostPool(
            [twice_unreadable(a.url), twice_unreadable(b.url)], limit=1, max_outage_s=3600
        )
        errors: list[str] = []
        while pool.outage is None and len(errors) < 20:
            with pytest.raises(BackendError) as e:
                await pool.chat(REQUEST)
            errors.append(str(e.value))
        await pool.aclose()
        assert a.url in str(pool.outage) and b.url in str(pool.outage)
    assert isinstance(pool.outage, UnreadableServer)
    assert str(pool.outage).startswith("no host sends answers tracegen can read (")
    assert len(errors) <= 4
