"""Write spans as OTLP JSON lines, the OpenTelemetry Collector file-exporter format.

One ``ExportTraceServiceRequest`` per line, camelCase keys, hex ids and
nanosecond times as strings, so ``agentscope ingest`` and any OTLP-JSON reader
can load the file back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agentscope.attributes import is_sensitive
from agentscope.sdk._safety import report


def any_value(value: Any) -> dict[str, Any]:
    """The OTLP JSON ``AnyValue`` of an attribute value."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OTLP JSON ``KeyValue`` list; keys that may carry credentials are left out."""
    return [
        {"key": key, "value": any_value(value)} for key, value in attributes.items() if not is_sensitive(key)
    ]


def _span_json(span: ReadableSpan) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": format(span.context.trace_id, "032x"),
        "spanId": format(span.context.span_id, "016x"),
        "name": span.name,
        "kind": span.kind.value + 1,
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": key_values(span.attributes or {}),
        "status": {"code": span.status.status_code.value},
    }
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
    if span.status.description:
        out["status"]["message"] = span.status.description
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": key_values(e.attributes or {})}
            for e in span.events
        ]
    return out


def export_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ExportTraceServiceRequest holding ``spans``, grouped by resource and scope."""
    groups: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = groups.setdefault(id(resource), (resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version or "") if scope is not None else ("", "")
        scopes.setdefault(key, []).append(_span_json(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values(resource.attributes if resource else {})},
                "scopeSpans": [
                    {"scope": {"name": name, "version": version}, "spans": span_list}
                    for (name, version), span_list in scopes.items()
                ],
            }
            for resource, scopes in groups.values()
        ]
    }


class JsonLinesSpanExporter(SpanExporter):
    """Append each exported batch to ``path`` as one OTLP JSON line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            line = json.dumps(export_request(spans), separators=(",", ":"), default=str)
            with self._lock, self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
        except OSError as exc:
            report(f"writing spans to {self.path}", exc, internal=False)
            return SpanExportResult.FAILURE
        except Exception as exc:
            report("encoding spans as OTLP JSON", exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass
