"""Every span attribute key agentscope reads or writes, defined once.

OpenTelemetry GenAI, HTTP and DB semantic-convention names are used where they
exist; everything else lives under ``agentscope.*``.  ``docs/attributes.md``
lists the same keys with their units; a test keeps the two in step.
"""

from __future__ import annotations

import functools
import re

# --- agentscope's own keys -------------------------------------------------
KIND = "agentscope.kind"
"""The agentscope span kind: task, agent, llm, tool, db, http, step, queue, backoff."""
TASK_NAME = "agentscope.task.name"
TASK_ACCEPTED = "agentscope.task.accepted"
CPU_NS = "agentscope.cpu_ns"
"""CPU time (ns) used by the span's code and its children while it was open (inclusive)."""
THREAD_ID = "agentscope.thread.id"
"""``threading.get_ident()`` of the thread that ran the span's code.

Own CPU is a span's CPU minus that of its children on the same thread."""
ATTEMPT = "agentscope.attempt"
"""Attempt number of a retried operation, 1 for the first try."""
BACKOFF_PLANNED_S = "agentscope.backoff.planned_s"
QUEUE_NAME = "agentscope.queue.name"
STEP_NAME = "agentscope.step.name"
STREAMED = "agentscope.llm.streamed"
STREAM_CHUNKS = "agentscope.llm.stream.chunks"
STREAM_WAIT_NS = "agentscope.llm.stream.wait_ns"
"""Time (ns) spent waiting inside the stream's iterator; the rest of a stream is the caller's."""
SERVER_QUEUE_MS = "agentscope.llm.server.queue_ms"
SERVER_PREFILL_MS = "agentscope.llm.server.prefill_ms"
SERVER_DECODE_MS = "agentscope.llm.server.decode_ms"
SERVER_TOTAL_MS = "agentscope.llm.server.total_ms"
INPUT = "agentscope.input"
"""The decorated function's arguments (repr), only with content capture on."""
OUTPUT = "agentscope.output"
"""The decorated function's return value (repr), only with content capture on."""

# --- OpenTelemetry GenAI conventions ---------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHED_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_RESPONSE_TTFC = "gen_ai.response.time_to_first_chunk"
"""Seconds from the request to the first content or tool-call chunk."""
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"

# --- OpenTelemetry HTTP and DB conventions ---------------------------------
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
HTTP_RESEND_COUNT = "http.request.resend_count"
SERVER_ADDRESS = "server.address"
DB_SYSTEM_NAME = "db.system.name"
DB_OPERATION_NAME = "db.operation.name"
DB_QUERY_TEXT = "db.query.text"

# --- resource and error ----------------------------------------------------
SERVICE_NAME = "service.name"
SERVICE_NAME_OURS = "agentscope.service.name"
"""``ags.init(service_name=…)`` on agentscope's spans when the joined tracer provider names another
service; ``--service`` matches it as it matches the resource's."""
ERROR_TYPE = "error.type"

OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
OPERATION_EMBEDDINGS = "embeddings"
OPERATION_EXECUTE_TOOL = "execute_tool"
OPERATION_INVOKE_AGENT = "invoke_agent"

SENSITIVE_KEY_PARTS = ("authorization", "api_key", "api-key", "apikey", "password", "secret", "cookie")
"""Attribute keys containing any of these are never stored, whatever produced the span."""


CONTENT_KEYS = frozenset(
    {
        INPUT,
        OUTPUT,
        DB_QUERY_TEXT,
        "db.statement",
        # OpenInference
        "input.value",
        "output.value",
        "llm.prompts",
        "tool_call.function.arguments",
        # OpenTelemetry GenAI (current and older) and OpenLLMetry
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "traceloop.entity.input",
        "traceloop.entity.output",
        "gen_ai.task.input",  # OpenLLMetry's LangChain spans, as its entity input and output since 0.5x
        "gen_ai.task.output",
        "traceloop.prompt.template",
        "traceloop.prompt.template_variables",
        "mcp.request.argument",  # OpenLLMetry's MCP spans: a tool call's arguments and result
        "mcp.response.value",
        # Langfuse
        "langfuse.observation.input",
        "langfuse.observation.output",
        "langfuse.trace.input",
        "langfuse.trace.output",
        # Logfire and pydantic-ai
        "request_data",
        "response_data",
        "all_messages_events",
        "pydantic_ai.all_messages",
        "final_result",
        "tool_arguments",
        "tool_response",
    }
)
"""Attribute keys that hold prompts, completions, tool arguments or query text, by instrumentation."""
CONTENT_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts.",
    "llm.prompt_template.",
    "retrieval.documents.",
    "reranker.input_documents.",
    "reranker.output_documents.",
    "embedding.embeddings.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "db.query.parameter.",  # OpenTelemetry's database conventions: a query's parameter values
)
"""Prefixes of flattened content keys (``llm.input_messages.0.message.content``, ``gen_ai.prompt.0.x``)."""
_RAW_REQUEST_CONTENT = r"llm\.[^.\"]+\.(?:messages|choices|input|system|instructions|content|output)"
"""LiteLLM's raw request and response, field by field under the provider's name (``llm.openai.messages``,
``llm.anthropic.system``, ``llm.openai.choices``): the fields that hold content, as a regular expression
of the whole key (or of its start, for a field flattened further).  Not ``prompt``: OpenInference's
``llm.token_count.prompt`` and ``llm.cost.prompt`` are counts, and RE2 (DuckDB's) has no lookahead to
tell them apart, so a legacy text completion's ``llm.<provider>.prompt`` is kept."""
_RAW_REQUEST_CONTENT_KEY = re.compile(_RAW_REQUEST_CONTENT + r"(?:$|\.)")


@functools.lru_cache(maxsize=8192)
def is_content(key: str) -> bool:
    """True for attribute keys that hold user content; stored only when content capture is on."""
    return (
        key in CONTENT_KEYS
        or key.startswith(CONTENT_PREFIXES)
        or (key.startswith("llm.") and _RAW_REQUEST_CONTENT_KEY.match(key) is not None)
    )


def content_pattern(before: str = "^", after: str = "$") -> str:
    """:func:`is_content` as one regular expression (RE2 and Python ``re`` alike): a key between
    ``before`` and ``after`` (a whole key by default; ``'"'`` for a key inside JSON text)."""
    exact = "|".join(re.escape(key) for key in sorted(CONTENT_KEYS))
    prefixes = "|".join(re.escape(prefix) for prefix in CONTENT_PREFIXES)
    return f"{before}(?:(?:{exact}){after}|(?:{prefixes})|{_RAW_REQUEST_CONTENT}(?:{after}|\\.))"


@functools.lru_cache(maxsize=8192)
def is_sensitive(key: str) -> bool:
    """True for attribute keys that may carry credentials; those are never stored."""
    lowered = key.lower()
    return any(part in lowered for part in SENSITIVE_KEY_PARTS)


def sensitive_pattern() -> str:
    """:data:`SENSITIVE_KEY_PARTS` as one regular expression (RE2 and Python ``re`` alike), to find in a
    lowered key."""
    return "|".join(re.escape(part) for part in SENSITIVE_KEY_PARTS)


def sensitive_sql(key: str) -> str:
    """:func:`is_sensitive` as a DuckDB condition on the key expression ``key`` (one lowering, one scan)."""
    return f"regexp_matches(lower({key}), '{sensitive_pattern()}')"
