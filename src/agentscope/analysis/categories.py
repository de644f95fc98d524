"""The eight categories a task's wall time is partitioned into, and their components.

A *component key* is either a category (``tool``) or ``category.component``
(``inference.decode``).  Attribution produces time per component key; reports
roll components up into their category.  Speedup factors may name either.
"""

from __future__ import annotations

from collections.abc import Mapping

CATEGORIES: tuple[str, ...] = ("inference", "queue", "network", "tool", "db", "retry", "cpu", "other")

COMPONENTS: Mapping[str, tuple[str, ...]] = {
    "inference": ("prefill", "decode", "unsplit"),
    "queue": ("provider", "client"),
    "network": (),
    "tool": (),
    "db": (),
    "retry": ("backoff", "failed"),
    "cpu": (),
    "other": (),
}

KEYS: tuple[str, ...] = tuple(
    f"{category}.{component}" if component else category
    for category in CATEGORIES
    for component in (COMPONENTS[category] or ("",))
)
"""Every component key, in report order."""

KEY_INDEX: Mapping[str, int] = {key: i for i, key in enumerate(KEYS)}

PREFILL = "inference.prefill"
DECODE = "inference.decode"
UNSPLIT = "inference.unsplit"
QUEUE_PROVIDER = "queue.provider"
QUEUE_CLIENT = "queue.client"
BACKOFF = "retry.backoff"
FAILED = "retry.failed"


def category_of(key: str) -> str:
    return key.split(".", 1)[0]


def valid_target(name: str) -> bool:
    """Whether a speedup may name ``name``: a category or a component key."""
    return name in COMPONENTS or name in KEY_INDEX


def factor_for(key: str, speedups: Mapping[str, float]) -> float:
    """The speedup that applies to component ``key``: its own, else its category's, else 1."""
    if key in speedups:
        return speedups[key]
    return speedups.get(category_of(key), 1.0)
