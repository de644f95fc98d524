"""What every reader yields, and the checks every span passes before it is stored.

A reader yields :class:`Record` objects: a stored row, a problem, or both (a
span kept after an oversized attribute was cut).  ``line`` is the line of a
line-based file, else the index of the span in the document (1-based).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from agentscope.store.rows import make_row

MAX_ATTRIBUTE_BYTES = 1 << 20
"""Longer attribute values are cut to this size and reported: one runaway value must not bloat the store."""


@dataclass(frozen=True)
class Record:
    line: int
    row: tuple | None = None
    problem: str | None = None


class BadSpan(ValueError):
    """A span that cannot be stored; the message says why."""


_HEX = frozenset("0123456789abcdef")


def hex_id(value: Any, width: int, what: str) -> str:
    """A lowercase hex id of ``width`` digits from hex text, base64 text or bytes."""
    if isinstance(value, str) and len(value) == width:
        text = value.lower()
        if _HEX.issuperset(text) and text.strip("0"):
            return text
    if isinstance(value, bytes):
        text = value.hex()
    elif isinstance(value, str):
        text = value.strip().lower()
        if len(text) != width or not _HEX.issuperset(text):
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) * 2 == width:
                text = raw.hex()
    else:
        raise BadSpan(f"{what} is {type(value).__name__}, not a hex string")
    if len(text) < width and len(text) in (16, 32) and _HEX.issuperset(text):
        text = text.rjust(width, "0")
    if len(text) != width or not _HEX.issuperset(text) or not text.strip("0"):
        raise BadSpan(f"{what} {value!r} is not {width} hex digits")
    return text


def optional_parent(value: Any) -> str | None:
    if value in (None, "", b""):
        return None
    if isinstance(value, str) and set(value) <= {"0"}:
        return None
    if isinstance(value, bytes) and set(value) <= {0}:
        return None
    return hex_id(value, 16, "parent span id")


def as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise BadSpan(f"{what} is a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise BadSpan(f"{what} {value!r} is not an integer")


def cut_oversized(attributes: dict[str, Any]) -> list[str]:
    """Cut string values over MAX_ATTRIBUTE_BYTES in place; the keys that were cut."""
    cut = []
    for key, value in attributes.items():
        if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_BYTES:
            attributes[key] = value[:MAX_ATTRIBUTE_BYTES]
            cut.append(f"{key} ({len(value):,} characters)")
    return cut


def record(
    line: int,
    *,
    trace_id: Any,
    span_id: Any,
    parent_id: Any,
    name: Any,
    span_kind: str | None,
    start_ns: Any,
    end_ns: Any,
    status: str,
    status_message: str | None,
    service: str | None,
    scope: str | None,
    attributes: dict[str, Any],
    trace_width: int = 32,
    check_sizes: bool = True,
    first_token_at: int | None = None,
) -> Record:
    """Check a span's fields and build its row; a problem record if it cannot be stored.

    ``first_token_at``: when the span's events mark its first token (see :func:`make_row`).

    ``check_sizes=False`` skips looking for oversized attribute values, for a reader
    that knows its whole input line is smaller than the limit.
    """
    try:
        trace = hex_id(trace_id, trace_width, "trace id")
        span = hex_id(span_id, 16, "span id")
        parent = optional_parent(parent_id)
        start = as_int(start_ns, "start time")
        end = as_int(end_ns, "end time")
        if start <= 0:
            raise BadSpan("start time is missing or not positive")
        if end < start:
            raise BadSpan(f"ends before it starts ({end} < {start})")
        if not isinstance(name, str):
            raise BadSpan(f"name is {type(name).__name__}, not a string")
        cut = cut_oversized(attributes) if check_sizes else []
        row = make_row(
            trace,
            span,
            parent,
            name,
            span_kind,
            start,
            end,
            status,
            status_message,
            service,
            scope,
            attributes,
            first_token_at=first_token_at,
        )
    except BadSpan as exc:
        return Record(line, problem=str(exc))
    problem = f"attribute value cut to 1 MiB: {', '.join(cut)}" if cut else None
    return Record(line, row=row, problem=problem)
