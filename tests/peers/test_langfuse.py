"""Langfuse: the agent traced with the langfuse SDK (its OpenAI wrapper for the model calls, its
observations for the task and the tools), exported as the public API's observations page built from
the langfuse package's own API models (ObservationV2), then read back by agentscope."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from harness import measure, openai_agent, otlp_json_line, require
from opentelemetry.sdk.trace import TracerProvider
from readers import both_readers

require("langfuse")
pytestmark = pytest.mark.patches_for_good  # langfuse.openai wraps the openai SDK when imported


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1000 / 1e6, tz=timezone.utc).replace(
        microsecond=ns // 1000 % 1_000_000
    )


def observations_page(spans, path: Path) -> Path:
    """What Langfuse's API returns for these spans: one ObservationV2 per span its SDK wrote."""
    from langfuse.api.commons.types.observation_v2 import ObservationV2
    from langfuse.api.observations.types.observations_v2meta import ObservationsV2Meta
    from langfuse.api.observations.types.observations_v2response import ObservationsV2Response

    observations = []
    for span in spans:
        a = span.attributes
        started = a.get("langfuse.observation.completion_start_time")
        usage = json.loads(a.get("langfuse.observation.usage_details") or "{}")
        observations.append(
            ObservationV2(
                id=format(span.context.span_id, "016x"),
                trace_id=format(span.context.trace_id, "032x"),
                parent_observation_id=format(span.parent.span_id, "016x") if span.parent else None,
                project_id="support",
                type=str(a.get("langfuse.observation.type", "span")).upper(),
                name=span.name,
                start_time=_time(span.start_time),
                end_time=_time(span.end_time),
                completion_start_time=datetime.fromisoformat(json.loads(started)) if started else None,
                model=a.get("langfuse.observation.model.name"),
                usage_details={key: n for key, n in usage.items() if isinstance(n, int)} or None,
                level="ERROR" if span.status.status_code.name == "ERROR" else "DEFAULT",
                environment="default",
            )
        )
    page = ObservationsV2Response(data=observations, meta=ObservationsV2Meta(cursor=None))
    path.write_text(page.json(), encoding="utf-8")
    return path


@pytest.fixture
def langfuse_public_key() -> str:
    """A new key each test: langfuse keeps one client per key, and its integrations trace through the
    one client of a process, or the one whose key the call names (they skip tracing otherwise)."""
    return f"pk-lf-{uuid.uuid4().hex}"


@pytest.fixture
def langfuse_client(otel, langfuse_public_key):
    from langfuse import Langfuse

    client = Langfuse(
        public_key=langfuse_public_key,
        secret_key="sk-lf-test",
        base_url="http://127.0.0.1:9",  # never reached: spans go to the exporter below
        tracer_provider=TracerProvider(),  # its own: Langfuse adds its processor, exporting to ours
        span_exporter=otel.exporter,
        flush_at=1,
    )
    yield client
    client.shutdown()


def test_langfuse_observations_blame_matches_the_known_delays(langfuse_client, otel, providers, tmp_path):
    from langfuse.openai import OpenAI

    def tool_span(name: str):
        return langfuse_client.start_as_current_observation(as_type="tool", name=name)

    def run(shape: str, base_url: str) -> None:
        with langfuse_client.start_as_current_observation(as_type="agent", name="support_task"):
            openai_agent(OpenAI(base_url=base_url, api_key="sim"), shape, tool_span)

    def export(folder: Path) -> Path:
        langfuse_client.flush()
        return observations_page(otel.exporter.get_finished_spans(), folder / "observations.json")

    measured = measure("Langfuse observations", run, export, providers, tmp_path)
    print(measured.row())
    measured.check_sequential()
    for _, result in measured.pairs("sequential"):
        assert result.llm_calls == 4 and result.input_tokens > 0 and result.output_tokens > 0
    measured.check_streamed()
    measured.check_hidden_retries()
    measured.check_parallel_tools()


def test_bad_observations_are_named_by_file_and_record_and_the_good_ones_kept(
    langfuse_client, otel, providers, tmp_path
):
    from langfuse.openai import OpenAI

    from agentscope.ingest import ingest
    from agentscope.store import Store

    with langfuse_client.start_as_current_observation(as_type="agent", name="support_task"):
        openai_agent(
            OpenAI(base_url=providers.normal.base_url, api_key="sim"),
            "sequential",
            lambda name: langfuse_client.start_as_current_observation(as_type="tool", name=name),
        )
    langfuse_client.flush()
    path = observations_page(otel.exporter.get_finished_spans(), tmp_path / "observations.json")
    page = json.loads(path.read_text())
    total = len(page["data"])
    del page["data"][1]["startTime"]
    page["data"][2]["type"], page["data"][2]["endTime"] = "SPAN", None
    page["data"][3]["startTime"] = "yesterday"
    path.write_text(json.dumps(page))
    with Store(None) as store:
        summary = ingest(store, [path])
        assert summary.formats["langfuse"] == 1
        assert store.span_count() == total - 3
    reasons = {(p.line, p.reason) for p in summary.problems}
    assert all(p.file == str(path) for p in summary.problems)
    assert reasons == {
        (2, "startTime is NoneType, not an ISO 8601 time"),
        (3, "SPAN observation has no endTime (it never ended, or was exported while open)"),
        (4, "startTime 'yesterday' is not an ISO 8601 time"),
    }


def test_langfuse_sdk_spans_as_otlp_json_lines_are_read_by_duckdb_as_python_reads_them(
    langfuse_client, langfuse_public_key, otel, providers
):
    """What Langfuse's SDK writes on a span (a usage object and, on a streamed call, a completion start
    time, both JSON in strings) is read by the DuckDB reader itself, to the byte the Python reader's row."""
    from langfuse import observe
    from langfuse.openai import OpenAI

    from agentscope import attributes as A

    @observe(name="support_task", as_type="agent")
    def task(shape: str) -> None:
        openai_agent(
            OpenAI(base_url=providers.normal.base_url, api_key="sim"),
            shape,
            lambda name: langfuse_client.start_as_current_observation(as_type="tool", name=name),
        )

    for shape in ("sequential", "streamed"):
        task(shape, langfuse_public_key=langfuse_public_key)  # the model calls trace through this client
    langfuse_client.flush()
    fast, python, routed = both_readers([otlp_json_line(otel.exporter.get_finished_spans())], decoded=False)
    assert routed == [] and fast == python  # the attributes' JSON text too
    generations = [json.loads(row["attributes"]) for row in fast.values() if row["kind"] == "llm"]
    counted = [g[A.GEN_AI_USAGE_INPUT_TOKENS] for g in generations if A.GEN_AI_USAGE_INPUT_TOKENS in g]
    streamed = [g[A.GEN_AI_RESPONSE_TTFC] for g in generations if A.GEN_AI_RESPONSE_TTFC in g]
    assert len(generations) == 8  # four calls a task; the streamed ones report no usage to Langfuse
    assert len(counted) == 4 and all(tokens > 0 for tokens in counted)
    assert len(streamed) == 4 and all(0.2 < ttft < 1.0 for ttft in streamed)  # 5 ms queue, 250 ms prefill
