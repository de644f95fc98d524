"""LangSmith runs: an export of Run objects (JSON array, JSON lines, or an API page of them).

A run has ``id``, ``trace_id``, ``parent_run_id``, ``run_type`` (llm, chain,
tool, retriever, embedding, prompt, parser), ``name``, ISO ``start_time`` and
``end_time`` and ``error``.  Token usage comes from ``usage_metadata``, from
``outputs.llm_output.token_usage``, or from the message in
``outputs.generations`` (where LangChain's tracer puts it); the first
``new_token`` event gives the time to first token.  The run type goes into
``langsmith.run_type`` and the kind tables (``agentscope.classify``) decide the
kind; prompts and completions (``inputs``, ``outputs``) are never stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from agentscope import attributes as A
from agentscope.classify import token_count
from agentscope.ingest.records import BadSpan, Record, record
from agentscope.ingest.runs import (
    dig,
    first_line,
    iso_ns,
    read_export,
    set_usage,
    span_id_of,
    trace_id_of,
)

RUN_TYPE = "langsmith.run_type"
RUN_ID = "langsmith.run_id"


def _root_of_dotted_order(dotted_order: Any) -> str | None:
    """The root run's id: the first segment of ``dotted_order`` is its start time then its id."""
    if not isinstance(dotted_order, str) or "Z" not in dotted_order:
        return None
    return dotted_order.split(".", 1)[0].split("Z", 1)[1] or None


def _usage(run: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(input, output, cached input) tokens, from wherever this run recorded them."""
    metadata = run.get("usage_metadata")
    if not isinstance(metadata, dict):
        generation = dig(run, "outputs", "generations")
        while isinstance(generation, list) and generation:
            generation = generation[0]
        metadata = dig(generation, "message", "kwargs", "usage_metadata")
    if isinstance(metadata, dict):
        cached = dig(metadata, "input_token_details", "cache_read")
        inputs, outputs = metadata.get("input_tokens"), metadata.get("output_tokens")
        return token_count(inputs), token_count(outputs), token_count(cached)
    usage = dig(run, "outputs", "llm_output", "token_usage") or dig(run, "outputs", "llm_output", "usage")
    if isinstance(usage, dict):
        return token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens")), None
    return token_count(run.get("prompt_tokens")), token_count(run.get("completion_tokens")), None


def _first_token_s(run: dict[str, Any], start_ns: int) -> float | None:
    for event in run.get("events") or []:
        if isinstance(event, dict) and event.get("name") == "new_token" and event.get("time"):
            return max(0, iso_ns(event["time"], "new_token event time") - start_ns) / 1e9
    return None


def run_record(run: Any, position: int) -> Record:
    """One run as a span row (or a problem naming what is wrong with it)."""
    try:
        if not isinstance(run, dict):
            raise BadSpan("run is not an object")
        run_id = run.get("id")
        span_id = span_id_of(run_id, "run id")
        parent = run.get("parent_run_id")
        trace = run.get("trace_id") or _root_of_dotted_order(run.get("dotted_order"))
        if trace is None and parent is None:
            trace = run_id
        if trace is None:
            raise BadSpan("run has a parent but no trace_id or dotted_order")
        trace_id = trace_id_of(str(trace), "trace id")
        start = iso_ns(run.get("start_time"), "start_time")
        if run.get("end_time") is None:
            raise BadSpan("run has no end_time (it never finished, or its update was not exported)")
        end = iso_ns(run["end_time"], "end_time")
        run_type = run.get("run_type")
        attributes: dict[str, Any] = {RUN_ID: str(run_id)}
        if run_type is not None:
            attributes[RUN_TYPE] = str(run_type)
        metadata = dig(run, "extra", "metadata") or {}
        params = dig(run, "extra", "invocation_params") or {}
        model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name")
        if run_type in ("llm", "embedding"):
            if model:
                attributes[A.GEN_AI_REQUEST_MODEL] = str(model)
            if metadata.get("ls_provider"):
                attributes[A.GEN_AI_PROVIDER_NAME] = str(metadata["ls_provider"])
            set_usage(attributes, *_usage(run))
            ttft = _first_token_s(run, start)
            if ttft is not None:
                attributes[A.GEN_AI_RESPONSE_TTFC] = ttft
        elif run_type == "tool" and run.get("name"):
            attributes[A.GEN_AI_TOOL_NAME] = str(run["name"])
    except BadSpan as exc:
        return Record(position, problem=str(exc))
    error = first_line(run.get("error"))
    return record(
        position,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=span_id_of(parent, "parent run id") if parent else None,
        name=str(run.get("name") or run_type or "run"),
        span_kind="INTERNAL",
        start_ns=start,
        end_ns=end,
        status="ERROR" if error else "OK",
        status_message=error,
        service=run.get("session_name"),
        scope="langsmith",
        attributes=attributes,
    )


def read(stream: IO[bytes]) -> Iterator[Record]:
    """Every run of a LangSmith export."""
    return read_export(stream, "runs", run_record, "LangSmith export")
