"""Span timestamps: epoch nanoseconds that advance with a monotonic clock.

OpenTelemetry stamps spans with ``time.time_ns()``, which jumps when the wall
clock is adjusted.  agentscope anchors ``perf_counter_ns`` to the epoch once, so
durations are monotonic while timestamps still line up with other services.
"""

from __future__ import annotations

import time

_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


def now_ns() -> int:
    """Epoch nanoseconds on a monotonic clock."""
    return _EPOCH_OFFSET_NS + time.perf_counter_ns()
