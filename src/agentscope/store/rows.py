"""One ``spans`` row from a span's fields, whoever produced the span.

Both the SDK's writer and the trace-file readers build rows here, so the same
conventions are normalised, the same kind rules applied and the same
credentials removed on every path into the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from agentscope import attributes as A
from agentscope.classify import classify, normalize, read_peer_fields


def _json_default(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


def attributes_json(attributes: Mapping[str, Any], keep_content: bool = False) -> str:
    """The JSON text stored for a span's attributes: credential-like keys removed, and content keys
    (prompts, completions, query text: :func:`agentscope.attributes.is_content`) unless kept."""
    clean = {
        key: value
        for key, value in attributes.items()
        if not A.is_sensitive(key) and (keep_content or not A.is_content(key))
    }
    return orjson.dumps(clean, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()


_CONTENT_KEY_IN_JSON = re.compile(A.content_pattern('"', '"'))
"""A content key as it stands in attributes JSON, between quotes."""


def without_content(row: tuple) -> tuple:
    """A ``spans`` row (``schema.COLUMNS`` order) with its content attributes dropped.

    Most rows hold none, so their JSON is only searched, not decoded.
    """
    text = row[-1]
    if not isinstance(text, str) or _CONTENT_KEY_IN_JSON.search(text) is None:
        return row
    return (*row[:-1], attributes_json(orjson.loads(text)))


def _digits(value: Any) -> int | None:
    """A digits-only value (ASCII, as DuckDB's reader matches it) that fits a BIGINT column; else None."""
    if not isinstance(value, (int, float, str)):
        return None
    text = str(value)
    if not (text.isascii() and text.isdigit()) or int(text) >= 1 << 63:
        return None
    return int(text)


def make_row(
    trace_id: str,
    span_id: str,
    parent_id: str | None,
    name: str,
    span_kind: str | None,
    start_ns: int,
    end_ns: int,
    status: str,
    status_message: str | None,
    service: str | None,
    scope: str | None,
    attributes: dict[str, Any],
    keep_content: bool = True,
    first_token_at: int | None = None,
) -> tuple:
    """A row in ``schema.COLUMNS`` order; ``attributes`` is consumed (CPU and thread move to columns).

    ``keep_content=False`` drops content attributes (see :func:`attributes_json`);
    ``first_token_at`` is when the span's events say its first token came
    (:func:`agentscope.classify.first_token_ns`)."""
    cpu_ns = attributes.pop(A.CPU_NS, None)
    thread_id = attributes.pop(A.THREAD_ID, None)
    normalize(attributes)
    read_peer_fields(attributes, start_ns, first_token_at)
    return (
        trace_id,
        span_id,
        parent_id,
        name,
        classify(attributes, span_kind, name),
        span_kind,
        start_ns,
        end_ns,
        status,
        status_message,
        service,
        scope,
        _digits(thread_id),
        _digits(cpu_ns),
        attributes_json(attributes, keep_content),
    )
