"""What the readers of LLM tracing services' exports share (LangSmith runs, Langfuse observations).

Those services are not OpenTelemetry: ids are UUIDs or free text, times are ISO
8601 strings, and an export is a JSON array, JSON lines, or an API page
(``{"data": [...]}``).  This module turns each into what ``records.record``
takes: OTel-width hex ids, integer nanoseconds, one object at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from typing import IO, Any

import orjson

from agentscope import attributes as A
from agentscope.ingest.jsonstream import JSONStreamError, iter_array
from agentscope.ingest.records import BadSpan, Record, hex_id

_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*(Z|[+-]\d\d:?\d\d)?$", re.IGNORECASE
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_HEX = frozenset("0123456789abcdef")


def iso_ns(value: Any, what: str) -> int:
    """Epoch nanoseconds of an ISO 8601 time, exactly (no float on the way); naive times are UTC."""
    if not isinstance(value, str):
        raise BadSpan(f"{what} is {type(value).__name__}, not an ISO 8601 time")
    match = _ISO.match(value.strip())
    if match is None:
        raise BadSpan(f"{what} {value!r} is not an ISO 8601 time")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=timezone.utc
        )
    except ValueError as exc:
        raise BadSpan(f"{what} {value!r}: {exc}") from None
    delta = moment - _EPOCH
    ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000
    if fraction:
        ns += int(fraction[:9].ljust(9, "0"))
    if zone and zone.upper() != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        ns -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * 1_000_000_000
    return ns


def _hex_digits(value: str) -> str:
    return value.replace("-", "").lower()


def span_id_of(value: Any, what: str) -> str:
    """A 16-hex-digit span id for a foreign id.

    OTel span ids (Langfuse's are) stay as they are; a UUID keeps its last 16
    digits (the random part of a UUIDv7, as LangSmith writes); any other text is
    hashed.  The original id is kept as an attribute by the reader.
    """
    if not isinstance(value, str) or not value:
        raise BadSpan(f"{what} is missing")
    digits = _hex_digits(value)
    if _HEX.issuperset(digits) and len(digits) in (16, 32) and digits.strip("0"):
        return digits[-16:]
    return hashlib.blake2b(value.encode(), digest_size=8).hexdigest()


def trace_id_of(value: Any, what: str) -> str:
    """A 32-hex-digit trace id for a foreign id (a UUID's digits, else a hash of the text)."""
    if not isinstance(value, str) or not value:
        raise BadSpan(f"{what} is missing")
    digits = _hex_digits(value)
    if _HEX.issuperset(digits) and len(digits) == 32 and digits.strip("0"):
        return digits
    return hashlib.blake2b(value.encode(), digest_size=16).hexdigest()


def stored_trace_ids(text: str) -> list[str]:
    """The stored trace ids that ``text``, a trace id as a user copied it, may stand for, likeliest first:
    agentscope's and OpenTelemetry's hex in any case, Jaeger's 16 digits, a LangSmith UUID with its dashes,
    a Langfuse or LangSmith id that is free text (stored as its hash, see :func:`trace_id_of`)."""
    text = text.strip()
    if not text:
        return []
    ids = [trace_id_of(text, "trace id")]
    with contextlib.suppress(BadSpan):
        ids.insert(0, hex_id(text, 32, "trace id"))
    return list(dict.fromkeys(ids))


def first_line(text: Any, limit: int = 500) -> str | None:
    """An error's first line, cut to ``limit`` characters (exports carry whole tracebacks)."""
    if text in (None, ""):
        return None
    line = str(text).strip().splitlines()[0] if str(text).strip() else str(text)
    return line[:limit]


def set_usage(
    attributes: dict[str, Any], inputs: int | None, outputs: int | None, cached: int | None
) -> None:
    """Put the token counts that are known under the GenAI keys the analyzer reads."""
    for key, value in (
        (A.GEN_AI_USAGE_INPUT_TOKENS, inputs),
        (A.GEN_AI_USAGE_OUTPUT_TOKENS, outputs),
        (A.GEN_AI_USAGE_CACHED_INPUT_TOKENS, cached),
    ):
        if value is not None:
            attributes[key] = value


def dig(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]…``, or None where any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def iter_objects(stream: IO[bytes], envelope: str = "data") -> Iterator[tuple[int, Any]]:
    """(position, object) for a JSON array, a ``{envelope: [...]}`` page, or JSON lines.

    Position is the line of a JSON-lines file, else the object's index (1-based).
    A line that is not JSON yields ``(line, JSONStreamError)`` so the reader can
    name it and go on; a broken array or page raises it.
    """
    head = stream.peek(64)[:64].lstrip() if hasattr(stream, "peek") else b""
    if head.startswith(b"["):
        yield from enumerate(iter_array(io.TextIOWrapper(stream, encoding="utf-8")), start=1)
        return
    first = stream.readline()
    value = _object_or_none(first)
    read = [first] if value is not None else [first, stream.readline()]
    if (value is None and _object_or_none(read[1]) is not None) or (
        value is not None and not isinstance(value.get(envelope), list)
    ):  # JSON lines (a broken first line is one of them when the next line is an object)
        yield from _json_lines(itertools.chain(read, stream))
        return
    try:  # one document over several lines, or an API page
        value = orjson.loads(b"".join(read) + stream.read())
    except orjson.JSONDecodeError as exc:
        raise JSONStreamError(f"invalid JSON: {exc}") from None
    items = value.get(envelope) if isinstance(value, dict) and envelope in value else [value]
    if not isinstance(items, list):
        raise JSONStreamError(f'"{envelope}" is not an array')
    yield from enumerate(items, start=1)


def _object_or_none(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _json_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, Any]]:
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield line_number, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            yield line_number, JSONStreamError(f"invalid JSON: {exc}")


def read_export(
    stream: IO[bytes], envelope: str, to_record: Callable[[Any, int], Record], what: str
) -> Iterator[Record]:
    """Every record of an export: each object through ``to_record``, each broken line or document named."""
    try:
        for position, item in iter_objects(stream, envelope):
            if isinstance(item, JSONStreamError):
                yield Record(position, problem=str(item))
            else:
                yield to_record(item, position)
    except JSONStreamError as exc:
        yield Record(0, problem=f"invalid {what}: {exc}")
