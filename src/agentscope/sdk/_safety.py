"""Instrumentation must never break the program it observes.

Every internal step of the SDK runs behind :func:`report`: an unexpected error
is counted and logged once per place through the ``agentscope`` logger, and the
user's code carries on.  Under the project's own tests (``AGENTSCOPE_STRICT=1``)
internal errors are re-raised instead, so a bug cannot hide behind the guard.
Failures of the environment (a locked store file, an unreachable collector) are
reported with ``internal=False`` and never re-raised.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter

logger = logging.getLogger("agentscope")

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def strict() -> bool:
    """True under the project's own tests: internal errors are raised, not swallowed."""
    return os.environ.get("AGENTSCOPE_STRICT") == "1"


def report(where: str, exc: BaseException, *, internal: bool = True) -> None:
    """Count a failure at ``where``; log the first one; re-raise internal ones when strict."""
    with _lock:
        _counts[where] += 1
        first = _counts[where] == 1
    if internal and strict():
        raise exc
    if first:
        logger.warning(
            "agentscope: %s failed: %s: %s (later failures here are counted, not logged)",
            where,
            type(exc).__name__,
            exc,
        )
