"""Small trace files in every format agentscope reads, written the way their producers write them."""

from __future__ import annotations

import json
from typing import Any

T1 = "0af7651916cd43dd8448eb211c80319c"
ROOT, LLM, TOOL = "b7ad6b7169203331", "00f067aa0ba902b7", "1111111111111111"
BASE = 1_700_000_000_000_000_000


def otlp_request(spans: list[dict], service: str = "svc") -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "test-producer"}, "spans": spans}],
            }
        ]
    }


def otlp_span(trace, span_id, parent, name, start_ms, end_ms, attributes=(), kind=1, status=0) -> dict:
    out = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(BASE + int(start_ms * 1e6)),
        "endTimeUnixNano": BASE + int(end_ms * 1e6),
        "attributes": list(attributes),
        "status": {"code": status},
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def s(key, value):
    return {"key": key, "value": {"stringValue": value}}


def i(key, value):
    return {"key": key, "value": {"intValue": str(value)}}


def agent_trace_otlp(trace: str = T1) -> dict:
    """An OpenLLMetry-style workflow: a task, a chat call with token usage, a tool."""
    return otlp_request(
        [
            otlp_span(trace, TOOL, ROOT, "search", 600, 900, [s("traceloop.span.kind", "tool")]),
            otlp_span(
                trace,
                LLM,
                ROOT,
                "openai.chat",
                100,
                500,
                [
                    s("llm.request.type", "chat"),
                    s("gen_ai.system", "openai"),
                    s("gen_ai.request.model", "gpt-oss-120b"),
                    i("gen_ai.usage.prompt_tokens", 120),
                    i("gen_ai.usage.completion_tokens", 30),
                    {"key": "llm.tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}]}}},
                    {"key": "meta", "value": {"kvlistValue": {"values": [i("n", 1)]}}},
                    {"key": "ratio", "value": {"doubleValue": 0.5}},
                    {"key": "flag", "value": {"boolValue": True}},
                ],
                kind=3,
            ),
            otlp_span(
                trace, ROOT, None, "resolve_ticket.workflow", 0, 1000, [s("traceloop.span.kind", "workflow")]
            ),
        ]
    )


def jaeger_document() -> dict:
    trace = "5b8aa5a2d2c872e8321cf37308d69df2"
    return {
        "data": [
            {
                "traceID": trace,
                "spans": [
                    {
                        "traceID": trace,
                        "spanID": "051581bf3cb55c13",
                        "operationName": "agent.run",
                        "references": [],
                        "startTime": 1_700_000_000_000_000,
                        "duration": 2_000_000,
                        "tags": [{"key": "openinference.span.kind", "type": "string", "value": "AGENT"}],
                        "processID": "p1",
                    },
                    {
                        "traceID": trace,
                        "spanID": "5fb6d2b3a1f2c8e1",
                        "operationName": "ChatCompletion",
                        "references": [
                            {"refType": "CHILD_OF", "traceID": trace, "spanID": "051581bf3cb55c13"}
                        ],
                        "startTime": 1_700_000_000_100_000,
                        "duration": 1_200_000,
                        "tags": [
                            {"key": "openinference.span.kind", "type": "string", "value": "LLM"},
                            {"key": "llm.model_name", "type": "string", "value": "gpt-4o"},
                            {"key": "llm.token_count.prompt", "type": "int64", "value": 200},
                            {"key": "llm.token_count.completion", "type": "int64", "value": 50},
                            {"key": "span.kind", "type": "string", "value": "client"},
                        ],
                        "processID": "p1",
                    },
                    {
                        "traceID": trace,
                        "spanID": "6fb6d2b3a1f2c8e2",
                        "operationName": "retrieve",
                        "references": [
                            {"refType": "FOLLOWS_FROM", "traceID": trace, "spanID": "051581bf3cb55c13"}
                        ],
                        "startTime": 1_700_000_001_400_000,
                        "duration": 300_000,
                        "tags": [
                            {"key": "openinference.span.kind", "type": "string", "value": "RETRIEVER"},
                            {"key": "error", "type": "bool", "value": True},
                        ],
                        "processID": "p1",
                    },
                ],
                "processes": {"p1": {"serviceName": "research-agent", "tags": []}},
            }
        ]
    }


def zipkin_spans() -> list[dict]:
    trace = "463ac35c9f6413ad48485a3953bb6124"
    return [
        {
            "traceId": trace,
            "id": "a2fb4a1d1a96d312",
            "name": "invoke_agent support",
            "timestamp": 1_700_000_000_000_000,
            "duration": 500_000,
            "localEndpoint": {"serviceName": "support"},
            "tags": {"gen_ai.operation.name": "invoke_agent"},
        },
        {
            "traceId": trace,
            "id": "b2fb4a1d1a96d313",
            "parentId": "a2fb4a1d1a96d312",
            "name": "get",
            "kind": "CLIENT",
            "timestamp": 1_700_000_000_050_000,
            "duration": 100_000,
            "localEndpoint": {"serviceName": "support"},
            "remoteEndpoint": {"serviceName": "billing"},
            "tags": {"http.method": "GET", "http.status_code": "200"},
        },
        {
            "traceId": trace,
            "id": "c2fb4a1d1a96d314",
            "parentId": "a2fb4a1d1a96d312",
            "name": "execute_tool lookup",
            "timestamp": 1_700_000_000_200_000,
            "duration": 250_000,
            "localEndpoint": {"serviceName": "support"},
            "tags": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
        },
        {
            "traceId": trace,
            "id": "d2fb4a1d1a96d315",
            "parentId": "a2fb4a1d1a96d312",
            "name": "SELECT",
            "timestamp": 1_700_000_000_460_000,
            "duration": 30_000,
            "localEndpoint": {"serviceName": "support"},
            "tags": {"db.system": "postgresql", "db.operation": "SELECT"},
        },
    ]


def dumps(value: object) -> str:
    return json.dumps(value)


def sdk_task_spans(tasks: int, chat_attributes: dict[str, Any]) -> list[Any]:
    """``tasks`` task spans, each around one chat span, as a real OpenTelemetry SDK provider finishes them
    (each chat span, then its task), for the real encoders."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("producer")
    for n in range(tasks):
        with (
            tracer.start_as_current_span(f"task {n}", attributes={"agentscope.kind": "task"}),
            tracer.start_as_current_span("chat", attributes=chat_attributes),
        ):
            pass
    return list(exporter.get_finished_spans())


def delimited(messages: list[bytes]) -> bytes:
    """Protobuf messages one after another, each after its length as a varint (OTLP delimited files)."""
    return b"".join(_varint(len(message)) + message for message in messages)


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out
