"""Hand-written traces for analyzer tests: spans as small dicts, times in ms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentscope.analysis.batch import SpanBatch, as_columns
from agentscope.analysis.trace import Trace

MS = 1_000_000


def span(
    span_id: str, parent: str | None, kind: str, start: float, end: float, **extra: Any
) -> dict[str, Any]:
    """A span from ``start`` to ``end`` ms; ``extra`` fills other analysis columns."""
    row = {
        "trace_id": extra.pop("trace_id", "t1"),
        "span_id": span_id,
        "parent_id": parent,
        "name": extra.pop("name", span_id),
        "kind": kind,
        "start_ns": int(start * MS),
        "end_ns": int(end * MS),
        "status": extra.pop("status", "UNSET"),
    }
    row.update(extra)
    return row


def batch(*spans: dict[str, Any]) -> SpanBatch:
    return SpanBatch.from_any(as_columns(spans))


def trace(*spans: dict[str, Any], repair: bool = True) -> Trace:
    b = batch(*spans)
    (rows,) = list(b.traces())
    return Trace.build(b, rows, repair=repair)


def path(t: Trace, task: int = 0) -> list[tuple[str, float, float]]:
    """The critical path as (span id, start ms, end ms), relative to the epoch of the test."""
    from agentscope.analysis.critical_path import critical_path

    return [(t.span_id(i), a / MS, b / MS) for i, a, b in critical_path(t, task)]


def store_row(
    trace, span_id, parent, kind, start_ms, end_ms, name=None, *, status="UNSET", **attributes
) -> tuple:
    """A ``spans`` row for writing straight into a store (times in ms)."""
    return (
        trace,
        span_id,
        parent,
        name or span_id,
        kind,
        "INTERNAL",
        int(start_ms * MS),
        int(end_ms * MS),
        status,
        None,
        "svc",
        "test",
        1,
        None,
        json.dumps(attributes),
    )


def llm_task_store(path: Path, sizes: list[tuple[int, int]], model: str | None = None) -> Path:
    """A store of one 1,000 ms task a size, each holding a 900 ms LLM call of that (input, output)."""
    from agentscope.store import Store
    from agentscope.store.schema import rows_to_table

    rows = []
    for k, (inputs, outputs) in enumerate(sizes):
        trace_id, task, call = f"{k + 1:032x}", f"{k:015x}a", f"{k:015x}b"
        usage = {"gen_ai.usage.input_tokens": inputs, "gen_ai.usage.output_tokens": outputs}
        if model is not None:
            usage["gen_ai.request.model"] = model
        rows += [
            store_row(trace_id, task, None, "task", 0, 1000, "ticket"),
            store_row(trace_id, call, task, "llm", 0, 900, "chat", **usage),
        ]
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    return path


def varied_store(
    path: Path, traces: int, seed: int = 7, llm_scale: float = 1.0, start_ms: float = 0.0
) -> Path:
    """A store of agent traces of many shapes, drawn at random (seeded).

    Each task runs LLM calls (some streamed, some with server timings, all with
    token counts), fans tools out in parallel, retries a failing HTTP call after
    a backoff, reads a database and waits in a client-side queue; two task names.
    ``llm_scale`` stretches every LLM call (0.5: a provider twice as fast), the
    same seed keeping every other draw; ``start_ms`` shifts all traces in time.
    """
    import random

    from agentscope.store import Store
    from agentscope.store.schema import rows_to_table

    rnd = random.Random(seed)
    rows = []
    for t in range(traces):
        rows += _varied_trace(rnd, 1_700_000_000_000.0 + start_ms + t * 60_000, llm_scale)
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    return path


def _varied_trace(rnd, base: float, llm_scale: float) -> list[tuple]:
    from agentscope import attributes as A

    trace_id, task = f"{rnd.getrandbits(128):032x}", f"{rnd.getrandbits(64):016x}"
    rows = []

    def child(kind, start, length, name, status="UNSET", **attributes) -> float:
        span_id = f"{rnd.getrandbits(64):016x}"
        rows.append(
            store_row(trace_id, span_id, task, kind, start, start + length, name, status=status, **attributes)
        )
        return start + length

    cursor = base + rnd.uniform(0, 5)
    for _ in range(rnd.randint(1, 4)):
        llm = {
            A.GEN_AI_REQUEST_MODEL: rnd.choice(("gpt-oss-120b", "llama-3.3-70b")),
            A.GEN_AI_USAGE_INPUT_TOKENS: rnd.randint(200, 4000),
            A.GEN_AI_USAGE_OUTPUT_TOKENS: rnd.randint(20, 600),
        }
        length, shape = rnd.uniform(200, 1500), rnd.random()
        if shape < 0.3:
            llm[A.GEN_AI_RESPONSE_TTFC] = length * rnd.uniform(0.1, 0.4) / 1000
        elif shape < 0.6:
            llm |= {
                A.SERVER_QUEUE_MS: length * 0.1,
                A.SERVER_PREFILL_MS: length * 0.3,
                A.SERVER_DECODE_MS: length * 0.5,
            }
        cursor = child("llm", cursor, length * llm_scale, "chat", **llm)
        if rnd.random() < 0.3:
            cursor = child(
                "queue", cursor, rnd.uniform(5, 80), "queue rate_limiter", **{A.QUEUE_NAME: "rate_limiter"}
            )
        tools = rnd.sample(("search", "read", "run", "fetch"), rnd.randint(1, 3))
        ends = [
            child(
                "tool",
                cursor + rnd.uniform(0, 3),
                rnd.uniform(10, 400),
                f"execute_tool {tool}",
                **{A.GEN_AI_TOOL_NAME: tool},
            )
            for tool in tools
        ]
        cursor = max(ends) + rnd.uniform(0.1, 2)
        if rnd.random() < 0.4:
            http = {A.SERVER_ADDRESS: "billing.internal", A.HTTP_REQUEST_METHOD: "GET"}
            for attempt in range(rnd.randint(1, 3)):
                failed = {A.HTTP_RESPONSE_STATUS_CODE: 503, A.ATTEMPT: attempt + 1}
                cursor = child("http", cursor, rnd.uniform(5, 60), "GET", "ERROR", **http, **failed)
                cursor = child("backoff", cursor, rnd.uniform(10, 200), "backoff")
            cursor = child(
                "http", cursor, rnd.uniform(5, 60), "GET", **http, **{A.HTTP_RESPONSE_STATUS_CODE: 200}
            )
        if rnd.random() < 0.5:
            db = {A.DB_SYSTEM_NAME: "postgresql", A.DB_OPERATION_NAME: "SELECT"}
            cursor = child("db", cursor, rnd.uniform(1, 40), "SELECT postgresql", **db)
    name = rnd.choice(("resolve_ticket", "triage"))
    root = store_row(
        trace_id, task, None, "task", base, cursor + rnd.uniform(0.5, 10), name, **{A.TASK_NAME: name}
    )
    return [root, *rows]
