"""Agent traces as OTLP JSON, in two shapes, for the ingest and blame benchmarks.

- ``rich`` (the default): shaped like what real SDKs write — an agent invocation with
  LLM calls (model, provider, response id, token counts, finish reasons, request
  parameters), tools with call ids and descriptions, DB spans with their query
  text, HTTP spans with full URLs; 4–9 attributes a span, about 400 bytes of
  attribute JSON a span, strings up to a few hundred characters, a resource of
  6 attributes, 10 traces (200 spans) a line.
- ``minimal``: the earlier benchmark shape — a task and 20 children with 1–5
  short attributes each, 50 traces a line.
- ``peers``: ``rich`` with every LLM call streamed and its stream recorded as
  the other instrumentations record it, a third of the traces each:
  OpenInference's first-token event, OpenLLMetry's completion chunk events
  (eight a call), or Langfuse's usage object and completion start time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BASE_NS = 1_700_000_000_000_000_000
SHAPES = ("rich", "minimal", "peers")

RESOURCE = [
    ("service.name", "support-agent"),
    ("service.version", "2.14.3"),
    ("deployment.environment.name", "production"),
    ("telemetry.sdk.name", "opentelemetry"),
    ("telemetry.sdk.language", "python"),
    ("host.name", "agent-worker-7f9c6d8b4-x2kqp"),
]
TOOL_DESCRIPTION = (
    "Search the knowledge base for articles that match the customer's question. Returns up to ten "
    "articles ranked by relevance, each with its title, a short excerpt and the URL of the full text, "
    "so the agent can cite them in its reply."
)
QUERY = (
    "SELECT t.id, t.subject, t.status, t.priority, c.name, c.email, c.plan, c.created_at "
    "FROM tickets t JOIN customers c ON c.id = t.customer_id WHERE t.id = $1 AND t.tenant_id = $2 "
    "ORDER BY t.updated_at DESC LIMIT 1"
)


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": v} for v in value]}}}
    return {"key": key, "value": {"stringValue": str(value)}}


def with_value(attributes: list[tuple[str, Any]], key: str, value: Any) -> list[tuple[str, Any]]:
    """``attributes`` with ``key`` given ``value``, in the same order."""
    return [(k, value if k == key else v) for k, v in attributes]


def _span(
    trace: str,
    span_id: str,
    parent: str | None,
    name: str,
    kind: int,
    start: int,
    end: int,
    attributes: list[tuple[str, Any]],
    status: int = 0,
) -> dict[str, Any]:
    span = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [kv(k, v) for k, v in attributes],
        "status": {"code": status} if status else {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _rich_children(trace_no: int) -> list[tuple[str, int, int, int, list[tuple[str, Any]], int]]:
    """(name, OTLP kind, start ms, length ms, attributes, status) of the 19 children of one task."""
    call = f"call_{trace_no:08x}"
    llm = [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "groq"),
        ("gen_ai.request.model", "openai/gpt-oss-120b"),
        ("gen_ai.response.model", "openai/gpt-oss-120b"),
        ("gen_ai.response.id", f"chatcmpl-{trace_no:012x}0000"),
        ("gen_ai.usage.input_tokens", 1800 + trace_no % 700),
        ("gen_ai.usage.output_tokens", 120 + trace_no % 90),
        ("gen_ai.response.finish_reasons", ["tool_calls"]),
        ("gen_ai.request.temperature", 0.2),
    ]
    tool = [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "search_knowledge_base"),
        ("gen_ai.tool.call.id", call),
        ("gen_ai.tool.type", "function"),
        ("gen_ai.tool.description", TOOL_DESCRIPTION),
    ]
    db = [
        ("db.system.name", "postgresql"),
        ("db.operation.name", "SELECT"),
        ("db.collection.name", "tickets"),
        ("db.namespace", "support"),
        ("db.query.text", QUERY),
        ("server.address", "pg-primary.internal"),
        ("server.port", 5432),
    ]
    http = [
        ("http.request.method", "GET"),
        (
            "url.full",
            f"https://billing.internal.example.com/v2/customers/{trace_no}/invoices?status=open&limit=20",
        ),
        ("server.address", "billing.internal.example.com"),
        ("server.port", 443),
        ("network.protocol.version", "1.1"),
        ("user_agent.original", "python-httpx/0.28.1"),
    ]
    failed = [*http[:4], ("http.response.status_code", 503), ("error.type", "503")]
    ok = [*http, ("http.response.status_code", 200)]
    return [
        ("SELECT support.tickets", 3, 1, 6, db, 0),
        ("chat openai/gpt-oss-120b", 3, 8, 420, llm, 0),
        ("execute_tool search_knowledge_base", 1, 430, 140, tool, 0),
        (
            "execute_tool search_knowledge_base",
            1,
            432,
            150,
            with_value(tool, "gen_ai.tool.call.id", call + "b"),
            0,
        ),
        ("GET", 3, 585, 40, failed, 2),
        ("GET", 3, 700, 45, ok, 0),
        ("chat openai/gpt-oss-120b", 3, 750, 380, llm, 0),
        (
            "execute_tool lookup_order",
            1,
            1135,
            60,
            with_value(tool[:4], "gen_ai.tool.name", "lookup_order"),
            0,
        ),
        ("SELECT support.orders", 3, 1200, 9, with_value(db, "db.collection.name", "orders"), 0),
        ("chat openai/gpt-oss-120b", 3, 1212, 350, llm, 0),
        ("GET", 3, 1565, 35, ok, 0),
        ("INSERT support.replies", 3, 1602, 7, with_value(db, "db.operation.name", "INSERT"), 0),
        ("chat openai/gpt-oss-120b", 3, 1612, 310, llm, 0),
        (
            "execute_tool send_reply",
            1,
            1925,
            80,
            with_value(tool[:4], "gen_ai.tool.name", "send_reply"),
            0,
        ),
        ("GET", 3, 2008, 30, ok, 0),
        ("SELECT support.tickets", 3, 2040, 5, db, 0),
        ("chat openai/gpt-oss-120b", 3, 2047, 290, llm, 0),
        (
            "execute_tool close_ticket",
            1,
            2340,
            25,
            with_value(tool[:4], "gen_ai.tool.name", "close_ticket"),
            0,
        ),
        ("UPDATE support.tickets", 3, 2367, 6, with_value(db, "db.operation.name", "UPDATE"), 0),
    ]


def rich_trace(trace_no: int) -> list[dict[str, Any]]:
    """One agent task of 20 spans (see the module's docstring)."""
    trace, root = f"{trace_no:032x}", f"{trace_no * 32:016x}"
    start = BASE_NS + trace_no * 10**9
    jitter = (trace_no % 97) * 3
    root_attributes = [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "support-agent"),
        ("gen_ai.agent.id", "asst_5kq2bT9w3mXe"),
        ("gen_ai.conversation.id", f"conv_{trace_no:016x}"),
        ("agentscope.task.name", "resolve_ticket"),
        ("enduser.id", f"user-{trace_no % 5000:05d}"),
    ]
    spans = [
        _span(
            trace,
            root,
            None,
            "invoke_agent support-agent",
            1,
            start,
            start + (2380 + jitter) * 10**6,
            root_attributes,
        )
    ]
    for j, (name, kind, a, length, attributes, status) in enumerate(_rich_children(trace_no)):
        shift = jitter if a > 8 else 0
        s = start + (a + shift) * 10**6
        spans.append(
            _span(
                trace,
                f"{trace_no * 32 + j + 1:016x}",
                root,
                name,
                kind,
                s,
                s + length * 10**6,
                attributes,
                status,
            )
        )
    return spans


def peers_trace(trace_no: int) -> list[dict[str, Any]]:
    """``rich_trace`` with its LLM calls streamed, recorded as one of three peer instrumentations does."""
    spans = rich_trace(trace_no)
    for span in spans:
        if not span["name"].startswith("chat "):
            continue
        start = int(span["startTimeUnixNano"])
        first = start + (150 + trace_no % 50) * 10**6
        if trace_no % 3 == 0:  # OpenInference
            span["events"] = [
                {"timeUnixNano": str(first), "name": "First Token Stream Event", "attributes": []}
            ]
        elif trace_no % 3 == 1:  # OpenLLMetry
            span["events"] = [
                {"timeUnixNano": str(first + k * 20 * 10**6), "name": "gen_ai.content.completion.chunk"}
                for k in range(8)
            ]
        else:  # Langfuse
            usage = {  # as its openai wrapper writes the provider's usage
                "completion_tokens": 120 + trace_no % 90,
                "prompt_tokens": 1800 + trace_no % 700,
                "total_tokens": 1920 + trace_no % 700 + trace_no % 90,
                "completion_tokens_details": None,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": None},
            }
            started = datetime.fromtimestamp(first // 1000 / 1e6, tz=timezone.utc).isoformat()
            span["attributes"] += [
                kv("langfuse.observation.usage_details", json.dumps(usage)),
                kv("langfuse.observation.completion_start_time", json.dumps(started.replace("+00:00", "Z"))),
            ]
    return spans


MINIMAL_CHILDREN = [
    (
        "chat gpt-oss-120b",
        3,
        [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.request.model", "gpt-oss-120b"),
            ("gen_ai.provider.name", "groq"),
            ("gen_ai.usage.input_tokens", 900),
            ("gen_ai.usage.output_tokens", 120),
        ],
    ),
    (
        "execute_tool search_kb",
        1,
        [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "search_kb")],
    ),
    ("SELECT postgresql", 3, [("db.system.name", "postgresql"), ("db.operation.name", "SELECT")]),
    (
        "GET",
        3,
        [
            ("http.request.method", "GET"),
            ("server.address", "billing.internal"),
            ("http.response.status_code", 200),
        ],
    ),
]


def minimal_trace(trace_no: int) -> list[dict[str, Any]]:
    """One task and 20 children with few, short attributes."""
    trace, root = f"{trace_no:032x}", f"{trace_no * 32:016x}"
    start = BASE_NS + trace_no * 10**9
    spans = [
        _span(
            trace, root, None, "resolve_ticket", 1, start, start + 21 * 10**7, [("agentscope.kind", "task")]
        )
    ]
    for j in range(20):
        name, kind, attributes = MINIMAL_CHILDREN[j % len(MINIMAL_CHILDREN)]
        s = start + j * 10**7
        spans.append(
            _span(trace, f"{trace_no * 32 + j + 1:016x}", root, name, kind, s, s + 9 * 10**6, attributes)
        )
    return spans


def requests(
    shape: str, spans: int, spans_per_line: int | None = None, after_trace: int = 0
) -> Iterator[dict[str, Any]]:
    """OTLP export requests holding at least ``spans`` spans of ``shape``, a line's worth each, the
    traces numbered from ``after_trace + 1``."""
    make, traces_per_line = {"rich": (rich_trace, 10), "peers": (peers_trace, 10)}.get(
        shape, (minimal_trace, 50)
    )
    resource = [("service.name", "bench")] if shape == "minimal" else RESOURCE
    written, trace_no = 0, after_trace
    while written < spans:
        line = []
        for _ in range(traces_per_line):
            trace_no += 1
            line += make(trace_no)
        step = spans_per_line or len(line)
        for k in range(0, len(line), step):
            yield {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [kv(key, value) for key, value in resource]},
                        "scopeSpans": [
                            {
                                "scope": {
                                    "name": "opentelemetry.instrumentation.agents",
                                    "version": "0.52b0",
                                },
                                "spans": line[k : k + step],
                            }
                        ],
                    }
                ]
            }
        written += len(line)


def write_file(
    path: Path, shape: str, spans: int, spans_per_line: int | None = None, after_trace: int = 0
) -> int:
    """OTLP JSON lines of ``shape`` at ``path`` (traces numbered from ``after_trace + 1``); returns the
    number of spans written."""
    count = 0
    with path.open("w") as out:
        for request in requests(shape, spans, spans_per_line, after_trace):
            out.write(json.dumps(request, separators=(",", ":")) + "\n")
            count += sum(len(ss["spans"]) for rs in request["resourceSpans"] for ss in rs["scopeSpans"])
    return count
