"""A token-bucket rate limiter whose waits are ``queue`` spans (blamed on ``queue.client``)."""

from __future__ import annotations

import threading
import time
from typing import Any

from agentscope.sdk.decorators import queue


class RateLimiter:
    """Allow ``rate`` acquisitions per second, with bursts of up to ``burst``.

    ``acquire()`` blocks until a token is free; the wait, when there is one,
    is recorded as a ``queue`` span named after the limiter.  Use it as
    ``with limiter:`` or ``async with limiter:`` around the limited call.
    """

    def __init__(self, rate: float, burst: int = 1, name: str = "rate_limiter") -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("RateLimiter needs rate > 0 and burst >= 1")
        self.rate, self.burst, self.name = float(rate), int(burst), name
        self._tokens = float(burst)
        self._updated = time.monotonic()
        self._lock = threading.Lock()

    def _reserve(self) -> float:
        """Take a token now or later; the seconds to wait for it."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            self._tokens -= 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self) -> None:
        wait = self._reserve()
        if wait > 0:
            with queue(self.name):
                time.sleep(wait)

    async def acquire_async(self) -> None:
        wait = self._reserve()
        if wait > 0:
            import asyncio  # here: only async code reaches this, and it has asyncio loaded already

            async with queue(self.name):
                await asyncio.sleep(wait)

    def __enter__(self) -> RateLimiter:
        self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    async def __aenter__(self) -> RateLimiter:
        await self.acquire_async()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        return None
