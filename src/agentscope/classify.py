"""Give every span an agentscope kind, whichever convention produced it.

The rules are tables, tried in order; the first that matches decides.  Our own
``agentscope.kind`` wins, then the OpenTelemetry GenAI operation, then the
OpenInference and OpenLLMetry span kinds, then the presence of GenAI, DB or
HTTP-client attributes.  Anything else is a ``step``.  ``docs/conventions.md``
lists the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentscope import attributes as A

KINDS = ("task", "agent", "llm", "tool", "db", "http", "step", "queue", "backoff")

VALUE_RULES: tuple[tuple[str, Mapping[str, str]], ...] = (
    (A.KIND, {kind: kind for kind in KINDS}),
    (
        A.GEN_AI_OPERATION_NAME,
        {
            "chat": "llm",
            "text_completion": "llm",
            "generate_content": "llm",
            "embeddings": "llm",
            "execute_tool": "tool",
            "invoke_agent": "agent",
            "create_agent": "agent",
        },
    ),
    (
        "openinference.span.kind",
        {
            "LLM": "llm",
            "EMBEDDING": "llm",
            "TOOL": "tool",
            "RETRIEVER": "db",
            "RERANKER": "tool",
            "CHAIN": "step",
            "AGENT": "agent",
        },
    ),
    ("traceloop.span.kind", {"workflow": "task", "agent": "agent", "task": "step", "tool": "tool"}),
    ("llm.request.type", {"chat": "llm", "completion": "llm", "embedding": "llm", "rerank": "llm"}),
)
"""(attribute key, {attribute value: kind}): the value of the key decides the kind."""

PRESENCE_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    ((A.GEN_AI_PROVIDER_NAME, "gen_ai.system"), "llm"),
    ((A.DB_SYSTEM_NAME, "db.system"), "db"),
    ((A.HTTP_REQUEST_METHOD, "http.method"), "http"),
)
"""(attribute keys, kind): any of the keys being present decides the kind."""


def classify(attributes: Mapping[str, Any], span_kind: str | None = None) -> str:
    """The agentscope kind of a span with these attributes and OTel span kind."""
    for key, table in VALUE_RULES:
        value = attributes.get(key)
        if value is not None:
            kind = table.get(str(value))
            if kind is not None:
                return kind
    for keys, kind in PRESENCE_RULES:
        if kind == "http" and span_kind == "SERVER":
            continue
        if any(key in attributes for key in keys):
            return kind
    return "step"
