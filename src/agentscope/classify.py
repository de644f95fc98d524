"""Read every span the same way, whichever convention produced it.

Two tables live here.  ``ALIASES`` maps other conventions' attribute keys (old
OTel names, OpenInference, OpenLLMetry, vLLM) onto the keys agentscope reads,
with unit conversions; :func:`normalize` applies it.  The kind rules are tried
in order and the first match decides: our own ``agentscope.kind``, then the
OpenTelemetry GenAI operation, then the OpenInference and OpenLLMetry span
kinds, then the presence of GenAI, DB or HTTP-client attributes.  Anything else
is a ``step``.  ``docs/conventions.md`` lists both tables.

Some packages record a call's timing or usage in shapes no key-for-key alias
can carry: the first token as a span event (OpenInference, OpenLLMetry), the
usage as a JSON object and the first token as an ISO time (Langfuse's spans).
:func:`read_peer_fields` turns those into our keys too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from agentscope import attributes as A

OPENINFERENCE_KIND = "openinference.span.kind"

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
        OPENINFERENCE_KIND,
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
    (
        "langsmith.run_type",
        {
            "llm": "llm",
            "embedding": "llm",
            "tool": "tool",
            "retriever": "db",
            "chain": "step",
            "prompt": "step",
            "parser": "step",
        },
    ),
    (
        "langfuse.observation.type",
        {
            spelling: kind
            for name, kind in (
                ("GENERATION", "llm"),
                ("EMBEDDING", "llm"),
                ("AGENT", "agent"),
                ("TOOL", "tool"),
                ("RETRIEVER", "db"),
                ("CHAIN", "step"),
                ("SPAN", "step"),
                ("EVENT", "step"),
                ("EVALUATOR", "step"),
                ("GUARDRAIL", "step"),
            )
            for spelling in (name, name.lower())
        },
    ),
    ("llm.request.type", {"chat": "llm", "completion": "llm", "embedding": "llm", "rerank": "llm"}),
)
"""(attribute key, {attribute value: kind}): the value of the key decides the kind."""

PRESENCE_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    ((A.GEN_AI_PROVIDER_NAME, "gen_ai.system"), "llm"),
    ((A.SERVER_QUEUE_MS, A.SERVER_PREFILL_MS, A.SERVER_DECODE_MS), "llm"),
    ((A.DB_SYSTEM_NAME, "db.system"), "db"),
    ((A.HTTP_REQUEST_METHOD, "http.method"), "http"),
)
"""(attribute keys, kind): any of the keys being present decides the kind."""


ALIASES: tuple[tuple[str, str, float], ...] = (
    # (their key, our key, multiplier to our unit)
    ("gen_ai.system", A.GEN_AI_PROVIDER_NAME, 1),
    ("llm.provider", A.GEN_AI_PROVIDER_NAME, 1),
    ("llm.system", A.GEN_AI_PROVIDER_NAME, 1),
    ("llm.model_name", A.GEN_AI_REQUEST_MODEL, 1),
    ("langfuse.observation.model.name", A.GEN_AI_REQUEST_MODEL, 1),
    ("gen_ai.usage.prompt_tokens", A.GEN_AI_USAGE_INPUT_TOKENS, 1),
    ("gen_ai.usage.completion_tokens", A.GEN_AI_USAGE_OUTPUT_TOKENS, 1),
    ("llm.usage.prompt_tokens", A.GEN_AI_USAGE_INPUT_TOKENS, 1),
    ("llm.usage.completion_tokens", A.GEN_AI_USAGE_OUTPUT_TOKENS, 1),
    ("llm.token_count.prompt", A.GEN_AI_USAGE_INPUT_TOKENS, 1),
    ("llm.token_count.completion", A.GEN_AI_USAGE_OUTPUT_TOKENS, 1),
    ("llm.token_count.prompt_details.cache_read", A.GEN_AI_USAGE_CACHED_INPUT_TOKENS, 1),
    ("gen_ai.usage.cache_read_input_tokens", A.GEN_AI_USAGE_CACHED_INPUT_TOKENS, 1),
    ("gen_ai.latency.time_in_queue", A.SERVER_QUEUE_MS, 1000),
    ("gen_ai.latency.time_to_first_token", A.GEN_AI_RESPONSE_TTFC, 1),
    ("gen_ai.latency.time_in_model_prefill", A.SERVER_PREFILL_MS, 1000),
    ("gen_ai.latency.time_in_model_decode", A.SERVER_DECODE_MS, 1000),
    ("tool.name", A.GEN_AI_TOOL_NAME, 1),
    ("db.system", A.DB_SYSTEM_NAME, 1),
    ("db.operation", A.DB_OPERATION_NAME, 1),
    ("db.statement", A.DB_QUERY_TEXT, 1),
    ("http.method", A.HTTP_REQUEST_METHOD, 1),
    ("http.status_code", A.HTTP_RESPONSE_STATUS_CODE, 1),
    ("net.peer.name", A.SERVER_ADDRESS, 1),
    ("http.host", A.SERVER_ADDRESS, 1),
)
"""(their key, our key, unit multiplier): filled in only where our key is absent."""


HELPER_METHOD = r"[A-Za-z0-9_]+\._[A-Za-z0-9_]*"
"""The name of a span OpenInference's LlamaIndex instrumentation makes for a private method of an LLM
class (``OpenAILike._prepare_chat_with_tools``): it marks every method ``LLM``, but a helper that builds
the request is not the request, so such a span is a step."""

_HELPER_METHOD = re.compile(HELPER_METHOD)

_ALIASES_BY_KEY: dict[str, list[tuple[str, float]]] = {}
for _theirs, _ours, _multiplier in ALIASES:
    _ALIASES_BY_KEY.setdefault(_theirs, []).append((_ours, _multiplier))


def normalize(attributes: dict[str, Any]) -> dict[str, Any]:
    """Add agentscope's keys for what other conventions recorded under theirs (in place)."""
    found = [key for key in attributes if key in _ALIASES_BY_KEY]
    for theirs in found:
        value = attributes[theirs]
        for ours, multiplier in _ALIASES_BY_KEY[theirs]:
            if ours in attributes:
                continue
            if multiplier != 1 and isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[ours] = value * multiplier
            else:
                attributes[ours] = value
    return attributes


FIRST_TOKEN_EVENTS = frozenset(
    {
        "First Token Stream Event",  # OpenInference
        "gen_ai.content.completion.chunk",  # OpenLLMetry, one per chunk
        "llm.content.completion.chunk",  # OpenLLMetry, older releases
    }
)
"""Span events that mark a streamed call's chunks; the earliest is its first token."""

LANGFUSE_USAGE = "langfuse.observation.usage_details"
LANGFUSE_FIRST_TOKEN = "langfuse.observation.completion_start_time"
PEER_FIELD_KEYS = (LANGFUSE_USAGE, LANGFUSE_FIRST_TOKEN)
"""Attributes :func:`read_peer_fields` reads (a JSON object, a JSON-quoted ISO time)."""

USAGE_INPUT_KEYS = ("input", "promptTokens", "prompt_tokens", "input_tokens")
USAGE_OUTPUT_KEYS = ("output", "completionTokens", "completion_tokens", "output_tokens")
USAGE_CACHED_KEYS = ("cache_read_input_tokens", "input_cached_tokens", "input_cache_read")
"""The names Langfuse's usage objects give the input, output and cached input token counts."""


def token_count(value: Any) -> int | None:
    """A token count, if ``value`` is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def usage_counts(usage: Any) -> tuple[int | None, int | None, int | None]:
    """(input, output, cached input) tokens of a Langfuse usage object; None where it has none."""
    if not isinstance(usage, Mapping):
        return None, None, None
    return tuple(  # type: ignore[return-value]
        next((n for n in (token_count(usage.get(key)) for key in keys) if n is not None), None)
        for keys in (USAGE_INPUT_KEYS, USAGE_OUTPUT_KEYS, USAGE_CACHED_KEYS)
    )


def first_token_ns(events: Iterable[tuple[str, int]]) -> int | None:
    """When a streamed call's first token came, from its (name, epoch ns) span events; None if not marked."""
    return min((at for name, at in events if name in FIRST_TOKEN_EVENTS), default=None)


def _json_or_none(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    import orjson  # here: a peer's JSON-string field is rare, and orjson costs the SDK's start-up 5 ms

    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def _iso_ns(value: Any) -> int | None:
    """Epoch ns of an ISO time (to the microsecond, as Langfuse writes it); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MICROSECOND * 1000


def read_peer_fields(attributes: dict[str, Any], start_ns: int, first_token_at: int | None = None) -> None:
    """Add our token and first-token keys from other packages' shapes (in place; ours win).

    ``first_token_at`` is :func:`first_token_ns` of the span's events.  A value
    that cannot be read (not JSON, not a time) is left as it is, unread.
    """
    if LANGFUSE_USAGE in attributes:
        counts = usage_counts(_json_or_none(attributes[LANGFUSE_USAGE]))
        keys = (A.GEN_AI_USAGE_INPUT_TOKENS, A.GEN_AI_USAGE_OUTPUT_TOKENS, A.GEN_AI_USAGE_CACHED_INPUT_TOKENS)
        for key, count in zip(keys, counts, strict=True):
            if count is not None:
                attributes.setdefault(key, count)
    if first_token_at is None and LANGFUSE_FIRST_TOKEN in attributes:
        first_token_at = _iso_ns(_json_or_none(attributes[LANGFUSE_FIRST_TOKEN]))
    if first_token_at is not None:
        attributes.setdefault(A.GEN_AI_RESPONSE_TTFC, max(0, first_token_at - start_ns) / 1e9)


def classify(attributes: Mapping[str, Any], span_kind: str | None = None, name: str | None = None) -> str:
    """The agentscope kind of a span with these attributes, OTel span kind and name."""
    for key, table in VALUE_RULES:
        value = attributes.get(key)
        if value is not None:
            kind = table.get(str(value))
            if kind is not None:
                if key == OPENINFERENCE_KIND and kind == "llm" and name and _HELPER_METHOD.fullmatch(name):
                    return "step"
                return kind
    for keys, kind in PRESENCE_RULES:
        if kind == "http" and span_kind == "SERVER":
            continue
        if any(key in attributes for key in keys):
            return kind
    return "step"


def sql_text(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def kind_sql(value_of: str, keys: str, span_kind: str, name: str) -> str:
    """The kind rules above as one DuckDB expression, for readers that classify inside DuckDB.

    ``value_of`` is a format string giving the string value of an attribute key
    (e.g. ``"attrs[{key}]"``), ``keys`` a list expression of the span's keys,
    ``span_kind`` the OTel span kind column and ``name`` the span name column.
    Built from the same tables as :func:`classify`, so both readers agree (tests
    compare them span for span).
    """
    helper = f"regexp_full_match({name}, {sql_text(HELPER_METHOD)})"
    rules = []
    for key, table in VALUE_RULES:
        cases = " ".join(
            f"WHEN {sql_text(value)} THEN "
            + (
                f"CASE WHEN {helper} THEN 'step' ELSE 'llm' END"
                if key == OPENINFERENCE_KIND and kind == "llm"
                else sql_text(kind)
            )
            for value, kind in table.items()
        )
        rules.append(f"CASE {value_of.format(key=sql_text(key))} {cases} END")
    for rule_keys, kind in PRESENCE_RULES:
        listed = ", ".join(sql_text(key) for key in rule_keys)
        test = f"list_has_any({keys}, [{listed}])"
        if kind == "http":
            test += f" AND {span_kind} IS DISTINCT FROM 'SERVER'"
        rules.append(f"CASE WHEN {test} THEN {sql_text(kind)} END")
    return f"coalesce({', '.join(rules)}, 'step')"


def _scaled_sql(value: str, multiplier: float) -> str:
    """JSON ``value`` times ``multiplier`` if it is a number, as Python computes it (an integer times an
    integer multiplier stays an integer, at any size); NULL otherwise."""
    as_double = f"(TRY_CAST({value} AS DOUBLE) * {float(multiplier)!r})::JSON"
    if not isinstance(multiplier, int):
        return f"CASE WHEN json_type({value}) IN ('UBIGINT', 'BIGINT', 'DOUBLE') THEN {as_double} END"
    as_integer = f"(TRY_CAST({value} AS HUGEINT) * {multiplier})::JSON"
    return (
        f"CASE json_type({value}) WHEN 'DOUBLE' THEN {as_double} "
        f"WHEN 'UBIGINT' THEN {as_integer} WHEN 'BIGINT' THEN {as_integer} END"
    )


def aliases_sql(entries: str, keys: str) -> str:
    """:func:`normalize` as a DuckDB list expression: the alias entries to append to ``entries``.

    ``entries`` is a list of ``{k, v}`` structs (key, JSON value) in the span's
    attribute order; for each of our keys that is absent, the first of its
    aliases in that order supplies the value (scaled, where the alias is in other
    units, when the value is a JSON number).  The entries come in the order
    :func:`normalize` adds them: by their source's place among the span's keys, then
    by the alias table's order (fields ``p`` and ``t``; readers use ``k`` and ``v``).
    """
    targets: dict[str, list[tuple[str, float]]] = {}
    for theirs, ours, multiplier in ALIASES:
        targets.setdefault(ours, []).append((theirs, multiplier))
    parts = []
    for order, (ours, sources) in enumerate(targets.items()):
        names = ", ".join(sql_text(theirs) for theirs, _ in sources)
        value = "x.v"
        scaled = " ".join(f"WHEN {sql_text(t)} THEN {_scaled_sql('x.v', m)}" for t, m in sources if m != 1)
        if scaled:
            value = f"coalesce(CASE x.k {scaled} END, x.v)"
        first = f"list_filter({entries}, lambda y: y.k IN ({names}))[1:1]"
        entry = f"{{p: list_position({keys}, x.k), t: {order}, k: {sql_text(ours)}, v: {value}}}"
        parts.append(
            f"CASE WHEN list_contains({keys}, {sql_text(ours)}) THEN []"
            f" ELSE list_transform({first}, lambda x: {entry}) END"
        )
    sources = ", ".join(sql_text(theirs) for theirs, _, _ in ALIASES)
    added = f"list_sort(flatten([{', '.join(parts)}]))"
    return f"CASE WHEN list_has_any({keys}, [{sources}]) THEN {added} ELSE [] END"
