"""When and how a model request is tried again: one `RetryPolicy` per backend, run by tenacity.

A request is retried when its error says so (`tracegen.errors.BackendError.retryable`),
waiting the server's ``Retry-After`` when it sent one, else a random time up to
``initial_s · 2^n`` (capped at ``max_s``): at most ``attempts`` attempts, ``max_waiting_s``
seconds of waiting in all, and no new attempt once ``max_elapsed_s`` have passed since the
first began (the run's outage window: a host failing that long is down, whatever its tries).

Most requests succeed at once, so the first attempt runs bare: tenacity costs about 25 µs of
CPU a call, a tenth of a model turn's (docs/performance.md). Its failure, when the policy
retries it, is tenacity's first attempt, so its counts, waits and stop see it as any other.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_random_exponential

from tracegen.config import RETRY_ATTEMPTS, RETRY_INITIAL_S, RETRY_MAX_S, RETRY_MAX_WAITING_S
from tracegen.errors import BackendError
from tracegen.llm.base import RetryListener

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How a backend's requests are retried (see the module docstring)."""

    attempts: int = RETRY_ATTEMPTS
    max_waiting_s: float = RETRY_MAX_WAITING_S
    initial_s: float = RETRY_INITIAL_S
    max_s: float = RETRY_MAX_S
    on_retry: RetryListener | None = None
    """Told each retry in one line (the error, the attempt, the wait)."""
    max_elapsed_s: float = math.inf
    """No attempt starts this long after the first began."""

    @staticmethod
    def retries(error: BaseException) -> bool:
        """Whether trying again may fix ``error``."""
        return isinstance(error, BackendError) and error.retryable

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` until it succeeds or fails in a way the policy does not retry."""
        started = time.monotonic()
        try:
            return await attempt()
        except BackendError as e:
            if self.attempts <= 1 or not self.retries(e):
                raise
            if time.monotonic() - started >= self.max_elapsed_s:
                raise
            first = e
        async for each in self.tenacity(started):
            with each:
                if each.retry_state.attempt_number == 1:
                    raise first
                return await attempt()
        raise AssertionError("tenacity ends by returning or raising")  # pragma: no cover

    def tenacity(self, started: float | None = None) -> AsyncRetrying:
        """The policy as tenacity runs it (a new one per request: tenacity keeps its state),
        for a request whose first attempt began at ``started`` (`time.monotonic`; now)."""
        began = time.monotonic() if started is None else started

        def stop(state: RetryCallState) -> bool:
            return self._stop(state) or time.monotonic() - began >= self.max_elapsed_s

        return AsyncRetrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception(self.retries),
            before_sleep=self._tell,
            reraise=True,
        )

    def _stop(self, state: RetryCallState) -> bool:
        return state.attempt_number >= self.attempts or state.idle_for >= self.max_waiting_s

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        after = getattr(error, "retry_after", None)
        if after is not None:
            return float(min(after, self.max_s))
        backoff = wait_random_exponential(multiplier=self.initial_s, max=self.max_s)
        return float(backoff(state))

    def _tell(self, state: RetryCallState) -> None:
        if self.on_retry is None:
            return
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        self.on_retry(
            f"{error} (attempt {state.attempt_number} of {self.attempts}); retrying in {wait:.1f}s"
        )
