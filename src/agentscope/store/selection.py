"""Which tasks to analyse: a task name, a service, a time window (DESIGN §8).

The store query turns a ``Selection`` into a predicate on whole traces
(``agentscope.store.query.selected_traces``), so only the traces that may hold a
selected task are read and analysed; ``admits`` then checks each task exactly.

    >>> Selection.parse(since="24h", now=datetime(2026, 12, 1, tzinfo=timezone.utc)).since_ns
    1764460800000000000
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class SelectionError(ValueError):
    """A selection option that cannot be understood; the message names it and says what it takes."""


def parse_time(text: str, now: datetime | None = None, option: str = "time") -> int:
    """Nanoseconds since the epoch of an ISO time (UTC unless it says otherwise) or of ``now`` minus
    a relative span (``90s``, ``15m``, ``24h``, ``7d``, ``2w``)."""
    now = now or datetime.now(timezone.utc)
    match = _RELATIVE.match(text)
    if match:
        try:
            moment = now - _span(match, text, option)
        except OverflowError:
            raise SelectionError(f"{option} {text!r}: reaches back before the year 1") from None
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise SelectionError(
                f"{option} {text!r}: give an ISO time (2026-11-30, 2026-11-30T14:00Z) or a span back "
                "from now (90s, 15m, 24h, 7d, 2w)"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def format_time(ns: int) -> str:
    """Epoch nanoseconds as an ISO time in UTC, to the second: ``2026-11-30T14:00:00Z``."""
    moment = datetime.fromtimestamp(ns / 1e9, timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_duration(text: str, option: str = "duration") -> int:
    """Nanoseconds of a span of time: ``90s``, ``15m``, ``24h``, ``30d``, ``2w``.

    A span of zero is refused: other tools read a retention of 0 as "keep everything", and here it
    would delete every trace as it arrives."""
    match = _RELATIVE.match(text)
    if not match:
        raise SelectionError(f"{option} {text!r}: give a span of time (90s, 15m, 24h, 30d, 2w)")
    delta = _span(match, text, option)
    if delta <= timedelta(0):
        raise SelectionError(
            f"{option} {text!r}: would keep nothing; give a span longer than zero, or leave {option} out "
            "to keep everything"
        )
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _span(match: re.Match[str], text: str, option: str) -> timedelta:
    """The span of time a :data:`_RELATIVE` match gives, refused past what a ``timedelta`` holds."""
    try:
        return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    except OverflowError:
        raise SelectionError(f"{option} {text!r}: too long a span (at most 999,999,999 days)") from None


@dataclass(frozen=True)
class Selection:
    """Tasks named ``task``, in traces with a span of ``service``, starting in ``[since_ns, until_ns)``."""

    task: str | None = None
    service: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None

    @classmethod
    def parse(
        cls,
        task: str | None = None,
        service: str | None = None,
        since: str | None = None,
        until: str | None = None,
        now: datetime | None = None,
    ) -> Selection:
        """From the CLI's (or the UI's) text; empty strings mean "any"."""
        since_ns = parse_time(since, now, "--since") if since else None
        until_ns = parse_time(until, now, "--until") if until else None
        if since_ns is not None and until_ns is not None and since_ns >= until_ns:
            raise SelectionError(f"--since {since!r} is not before --until {until!r}")
        return cls(task or None, service or None, since_ns, until_ns)

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.task, self.service, self.since_ns, self.until_ns))

    def admits(self, task_name: str, start_ns: int) -> bool:
        """Whether a task of this name starting then is selected (the exact, task-level check)."""
        if self.task is not None and task_name != self.task:
            return False
        if self.since_ns is not None and start_ns < self.since_ns:
            return False
        return self.until_ns is None or start_ns < self.until_ns

    def describe(self) -> str:
        """The selection in words to follow "tasks", with its leading space (`` named 'resolve_ticket',
        of service 'api', since …``); empty when it selects every task."""
        parts = []
        if self.task is not None:
            parts.append(f"named {self.task!r}")
        if self.service is not None:
            parts.append(f"of service {self.service!r}")
        for word, ns in (("since", self.since_ns), ("until", self.until_ns)):
            if ns is not None:
                parts.append(f"{word} {format_time(ns)}")
        return " " + ", ".join(parts) if parts else ""
