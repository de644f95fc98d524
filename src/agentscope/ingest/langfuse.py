"""Langfuse observations: the public API's export (a page ``{"data": [...]}``, a JSON array, or JSON lines).

An observation has ``id``, ``traceId``, ``parentObservationId``, ``type``
(SPAN, GENERATION, EVENT, AGENT, TOOL, RETRIEVER, CHAIN, EMBEDDING, …), ``name``,
ISO ``startTime``/``endTime``, ``completionStartTime`` (its first token),
``model``, token usage in ``usageDetails`` (or the older ``usage`` and
``promptTokens``/``completionTokens``) and ``level`` (ERROR marks a failure,
with ``statusMessage``).  The type goes into ``langfuse.observation.type`` —
the key Langfuse's own OpenTelemetry spans carry — and the kind tables decide
the kind.  An EVENT is a point in time (no ``endTime``).  Inputs and outputs
are never stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from agentscope import attributes as A
from agentscope.classify import usage_counts
from agentscope.ingest.records import BadSpan, Record, record
from agentscope.ingest.runs import first_line, iso_ns, read_export, set_usage, span_id_of, trace_id_of

OBSERVATION_TYPE = "langfuse.observation.type"
OBSERVATION_ID = "langfuse.observation.id"


def _usage(observation: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(input, output, cached input) tokens: ``usageDetails``, else ``usage``, else the top-level counts."""
    for source in (observation.get("usageDetails"), observation.get("usage"), observation):
        counts = usage_counts(source)
        if counts[0] is not None or counts[1] is not None:
            return counts
    return None, None, None


def observation_record(observation: Any, position: int) -> Record:
    """One observation as a span row (or a problem naming what is wrong with it)."""
    try:
        if not isinstance(observation, dict):
            raise BadSpan("observation is not an object")
        kind = str(observation.get("type") or "SPAN").upper()
        start = iso_ns(observation.get("startTime"), "startTime")
        if observation.get("endTime") is not None:
            end = iso_ns(observation["endTime"], "endTime")
        elif kind == "EVENT":
            end = start
        else:
            raise BadSpan(f"{kind} observation has no endTime (it never ended, or was exported while open)")
        attributes: dict[str, Any] = {OBSERVATION_TYPE: kind, OBSERVATION_ID: str(observation.get("id"))}
        if kind in ("GENERATION", "EMBEDDING"):
            if observation.get("model"):
                attributes[A.GEN_AI_REQUEST_MODEL] = str(observation["model"])
            set_usage(attributes, *_usage(observation))
            if observation.get("completionStartTime"):
                first = iso_ns(observation["completionStartTime"], "completionStartTime")
                attributes[A.GEN_AI_RESPONSE_TTFC] = max(0, first - start) / 1e9
        elif kind == "TOOL" and observation.get("name"):
            attributes[A.GEN_AI_TOOL_NAME] = str(observation["name"])
        trace_id = trace_id_of(observation.get("traceId"), "traceId")
        span_id = span_id_of(observation.get("id"), "observation id")
        parent = observation.get("parentObservationId")
        parent_id = span_id_of(parent, "parentObservationId") if parent else None
    except BadSpan as exc:
        return Record(position, problem=str(exc))
    failed = str(observation.get("level") or "").upper() == "ERROR"
    return record(
        position,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=str(observation.get("name") or kind.lower()),
        span_kind="INTERNAL",
        start_ns=start,
        end_ns=end,
        status="ERROR" if failed else "OK",
        status_message=first_line(observation.get("statusMessage")) if failed else None,
        service=observation.get("environment"),
        scope="langfuse",
        attributes=attributes,
    )


def read(stream: IO[bytes]) -> Iterator[Record]:
    """Every observation of a Langfuse export."""
    return read_export(stream, "data", observation_record, "Langfuse export")
