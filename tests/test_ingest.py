"""Ingest of trace files: every format, by content; idempotent; bad input named, good spans kept."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import clirun
import pytest
from traces_fixtures import (
    T1,
    agent_trace_otlp,
    delimited,
    dumps,
    jaeger_document,
    otlp_request,
    otlp_span,
    sdk_task_spans,
    zipkin_spans,
)
from traces_fixtures import s as text_attribute

import agentscope as ags
from agentscope.ingest import ingest
from agentscope.ingest.batching import BATCH_ROWS
from agentscope.store import Store
from agentscope.store.shared import SharedStore

cli = partial(clirun.cli, columns=200)


def kinds(store: Store) -> dict[str, str]:
    return dict(store.con.execute("SELECT name, kind FROM spans").fetchall())


def attrs(store: Store, name: str) -> dict:
    (text,) = store.con.execute("SELECT attributes FROM spans WHERE name = ?", [name]).fetchall()[0]
    return json.loads(text)


def test_otlp_json_lines_from_an_openllmetry_style_producer(tmp_path):
    path = tmp_path / "traces.bin"  # the name says nothing; the content decides
    path.write_text(dumps(agent_trace_otlp()) + "\n\n")
    with Store(None) as store:
        summary = ingest(store, [str(path)])  # a path as text, as a caller often has it
        assert summary.ok and summary.formats == {"otlp-json-lines": 1}
        assert (summary.spans_read, summary.stored, summary.traces, summary.tasks) == (3, 3, 1, 1)
        assert kinds(store) == {"resolve_ticket.workflow": "task", "openai.chat": "llm", "search": "tool"}
        llm = attrs(store, "openai.chat")
        assert llm["gen_ai.usage.input_tokens"] == 120 and llm["gen_ai.usage.output_tokens"] == 30
        assert llm["gen_ai.provider.name"] == "openai"
        assert llm["llm.tags"] == ["a"] and llm["meta"] == {"n": 1} and llm["flag"] is True
        (row,) = store.con.execute(
            "SELECT span_kind, service, scope, parent_id FROM spans WHERE name='openai.chat'"
        ).fetchall()
        assert row == ("CLIENT", "svc", "test-producer", "b7ad6b7169203331")


def test_langfuse_otel_spans_give_model_tokens_and_first_token(tmp_path):
    """Langfuse's own spans keep usage as a JSON object and the first token as a JSON-quoted ISO time."""
    first_token = "2023-11-14T22:13:20.120000Z"  # BASE + 120 ms
    usage = {"prompt_tokens": 12, "completion_tokens": 80, "total_tokens": 92}
    generation = otlp_span(
        T1,
        "00f067aa0ba902b7",
        None,
        "OpenAI-generation",
        0,
        400,
        [
            text_attribute("langfuse.observation.type", "generation"),
            text_attribute("langfuse.observation.model.name", "gpt-oss-120b"),
            text_attribute("langfuse.observation.usage_details", json.dumps(usage)),
            text_attribute("langfuse.observation.completion_start_time", json.dumps(first_token)),
        ],
    )
    unreadable = otlp_span(
        T1,
        "1111111111111111",
        None,
        "broken-generation",
        0,
        400,
        [
            text_attribute("langfuse.observation.type", "generation"),
            text_attribute("langfuse.observation.usage_details", "{not json"),
            text_attribute("langfuse.observation.completion_start_time", '"yesterday"'),
        ],
    )
    path = tmp_path / "langfuse.jsonl"
    path.write_text(dumps(otlp_request([generation, unreadable])) + "\n")
    with Store(None) as store:
        assert ingest(store, [path]).ok
        llm = attrs(store, "OpenAI-generation")
        broken = attrs(store, "broken-generation")
    assert llm["gen_ai.request.model"] == "gpt-oss-120b"
    assert (llm["gen_ai.usage.input_tokens"], llm["gen_ai.usage.output_tokens"]) == (12, 80)
    assert llm["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.120)
    assert "gen_ai.usage.input_tokens" not in broken and "gen_ai.response.time_to_first_chunk" not in broken
    assert broken["langfuse.observation.usage_details"] == "{not json"  # kept as it came, unread


def test_single_pretty_printed_otlp_document_and_gzip(tmp_path):
    (tmp_path / "doc.json").write_text(json.dumps(agent_trace_otlp(), indent=2))
    with gzip.open(tmp_path / "lines.gz", "wt") as out:
        out.write(dumps(agent_trace_otlp("1" * 32)) + "\n")
    with Store(None) as store:
        summary = ingest(store, [tmp_path])
        assert summary.ok
        assert summary.formats == {"otlp-json": 1, "otlp-json-lines": 1}
        assert summary.stored == 6 and summary.traces == 2


def test_jaeger_and_zipkin_with_foreign_conventions(tmp_path):
    (tmp_path / "jaeger.json").write_text(json.dumps(jaeger_document()))
    (tmp_path / "zipkin.json").write_text(json.dumps(zipkin_spans()))
    with gzip.open(tmp_path / "more.json.gz", "wt") as out:
        json.dump(
            {"traceID": "7" * 32, "spans": jaeger_document()["data"][0]["spans"][:1], "processes": {}}, out
        )
    with Store(None) as store:
        summary = ingest(store, [tmp_path])
        assert summary.ok, summary.problems
        assert summary.formats == {"jaeger": 1, "zipkin": 1, "jaeger-trace": 1}
        k = kinds(store)
        assert k["agent.run"] == "agent" and k["ChatCompletion"] == "llm" and k["retrieve"] == "db"
        assert k["invoke_agent support"] == "agent" and k["get"] == "http" and k["SELECT"] == "db"
        assert attrs(store, "ChatCompletion")["gen_ai.request.model"] == "gpt-4o"
        assert attrs(store, "ChatCompletion")["gen_ai.usage.input_tokens"] == 200
        assert attrs(store, "get")["server.address"] == "billing"
        rows = dict(
            store.con.execute(
                "SELECT name, (span_kind, status, service, end_ns - start_ns) FROM spans"
            ).fetchall()
        )
        assert rows["retrieve"] == ("CONSUMER", "ERROR", "research-agent", 300_000_000)
        assert rows["get"][0] == "CLIENT" and rows["get"][3] == 100_000_000


def test_a_jaeger_reference_into_another_trace_is_not_a_parent(tmp_path):
    """Jaeger shows an OpenTelemetry span link as a FOLLOWS_FROM reference, often into another trace (the
    producer of a message): such a root was stored as a consumer under a parent it cannot have."""
    trace, other = "1" * 32, "2" * 32

    def span(span_id, references, name, tags):
        timing = {"startTime": 1_700_000_000_000_000, "duration": 1000}
        ids = {"traceID": trace, "spanID": span_id, "references": references, "processID": "p1"}
        return {**ids, "operationName": name, **timing, "tags": tags}

    link = {"refType": "FOLLOWS_FROM", "traceID": other, "spanID": "9" * 16}
    same = {"refType": "FOLLOWS_FROM", "traceID": trace, "spanID": "a" * 16}
    spans = [
        span("a" * 16, [link], "handle message", [{"key": "agentscope.kind", "value": "task"}]),
        span("b" * 16, [same], "follow-up", []),
    ]
    document = {"data": [{"traceID": trace, "processes": {"p1": {"serviceName": "worker"}}, "spans": spans}]}
    (tmp_path / "jaeger.json").write_text(json.dumps(document))
    with Store(None) as store:
        assert ingest(store, [tmp_path / "jaeger.json"]).ok
        rows = dict(store.con.execute("SELECT name, (parent_id, span_kind) FROM spans").fetchall())
    assert rows["handle message"] == (None, "INTERNAL")
    assert rows["follow-up"] == ("a" * 16, "CONSUMER")


def test_zipkin_shared_server_spans_get_an_id_of_their_own(tmp_path):
    """Brave reports an RPC's server side under the client's span id (``shared``): it was refused as a
    second copy of the client span. It is kept under an id of its own, child of the client, and the model
    call it made is moved under it by the enclosed-sibling repair."""
    us, trace, client = 1_700_000_000_000_000, "a" * 16, "0000000000000002"

    def span(span_id, parent, name, at_ms, ms, service, **extra):
        timing = {"timestamp": us + at_ms * 1000, "duration": ms * 1000}
        ids = {"traceId": trace, "id": span_id, "parentId": parent}
        return {**ids, "name": name, **timing, "localEndpoint": {"serviceName": service}, **extra}

    http = {"http.method": "POST", "http.path": "/generate"}
    spans = [
        span("0000000000000001", None, "answer", 0, 1000, "agent", tags={"agentscope.kind": "task"}),
        span(client, "0000000000000001", "post /generate", 100, 600, "agent", kind="CLIENT", tags=http),
        span(
            client,
            "0000000000000001",
            "post /generate",
            120,
            560,
            "model-gateway",
            kind="SERVER",
            shared=True,
        ),
        span(
            "0000000000000003",
            client,
            "chat",
            150,
            400,
            "model-gateway",
            tags={"gen_ai.operation.name": "chat"},
        ),
    ]
    (tmp_path / "zipkin.json").write_text(json.dumps(spans))
    with Store(None) as store:
        summary = ingest(store, [tmp_path / "zipkin.json"])
        assert summary.ok, summary.problems
        assert store.span_count() == 4
        rows = store.con.execute(
            "SELECT span_id, parent_id, service, attributes FROM spans WHERE span_kind = 'SERVER'"
        ).fetchall()
        ((own, parent, service, attributes),) = rows
        assert own not in (client, "0000000000000001", "0000000000000003") and parent == client
        assert service == "model-gateway" and json.loads(attributes)["zipkin.shared_span_id"] == client
        again = ingest(store, [tmp_path / "zipkin.json"])
        assert again.ok and again.already_stored == 4 and store.span_count() == 4
    blamed = cli("blame", str(tmp_path / "zipkin.json"), "--format", "json")
    assert blamed.returncode == 0, blamed.stderr
    doc = json.loads(blamed.stdout)
    budget = {row["category"]: row["ms"] for row in doc["budget"]}
    assert budget["inference"] == pytest.approx(400) and budget["network"] == pytest.approx(40)
    assert doc["latency_ms"]["p95"] == pytest.approx(1000) and doc["repaired_spans"] == 1


def test_otlp_protobuf_single_and_length_delimited_from_the_real_otel_encoder(tmp_path):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = sdk_task_spans(3, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5})
    messages = [encode_spans(spans[k : k + 2]).SerializeToString() for k in (0, 2, 4)]
    (tmp_path / "single.pb").write_bytes(messages[0])
    stream_bytes = delimited(messages)
    (tmp_path / "stream.otlp").write_bytes(stream_bytes)
    with gzip.open(tmp_path / "stream.otlp.gz", "wb") as out:
        out.write(stream_bytes)
    with Store(None) as store:
        summary = ingest(store, [tmp_path])
        assert summary.ok, summary.problems
        assert summary.formats == {"otlp-proto": 1, "otlp-proto-delimited": 2}
        assert store.span_count() == 6 and summary.stored == 6 and summary.already_stored == 8
        assert dict(store.con.execute("SELECT kind, count(*) FROM spans GROUP BY kind").fetchall()) == {
            "task": 3,
            "llm": 3,
        }


def test_otlp_json_with_protobufs_field_names_reads_as_the_camel_case_one(tmp_path):
    """protobuf's JSON writers can keep the field names (``resource_spans``, ``string_value``), and its
    parsers accept them: such a file, or a receiver's body, stores what its lowerCamelCase twin does."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentscope.ingest.receiver import decode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("producer")
    chat_attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "cached": True}
    with (
        tracer.start_as_current_span("task", attributes={"agentscope.kind": "task", "tags": ["a", "b"]}),
        tracer.start_as_current_span("chat gpt-4o", attributes=chat_attributes) as chat,
    ):
        chat.add_event("gen_ai.content.completion_chunk")
    request = encode_spans(exporter.get_finished_spans())
    proto_names = MessageToJson(request, preserving_proto_field_name=True, indent=None)
    assert '"resource_spans"' in proto_names and '"start_time_unix_nano"' in proto_names
    (tmp_path / "snake.jsonl").write_text(proto_names + "\n")
    (tmp_path / "camel.jsonl").write_text(MessageToJson(request, indent=None) + "\n")
    (tmp_path / "snake.json").write_text(MessageToJson(request, preserving_proto_field_name=True))
    tables = {}
    for name in ("snake.jsonl", "camel.jsonl", "snake.json"):
        with Store(None) as store:
            summary = ingest(store, [tmp_path / name])
            assert summary.ok and summary.stored == 2, (name, summary.problems)
            tables[name] = store.con.execute("SELECT * FROM spans ORDER BY span_id").fetchall()
    assert tables["snake.jsonl"] == tables["camel.jsonl"] == tables["snake.json"]
    assert {row[4] for row in tables["camel.jsonl"]} == {"task", "llm"}
    received = decode(proto_names.encode(), "application/json")
    assert [record.row for record in received] == [
        record.row for record in decode(MessageToJson(request).encode(), "application/json")
    ]
    assert all(record.problem is None for record in received) and len(received) == 2


def test_trace_stores_answers_read_as_the_otlp_requests_they_hold(tmp_path):
    """Grafana Tempo answers ``GET /api/traces/<id>`` with ``{"batches": [...]}`` and ``/api/v2/traces/<id>``
    with ``{"trace": {"batches": [...]}, "metrics": {...}}``, ids in base64 as protobuf's JSON writes bytes;
    Jaeger 2 answers ``/api/v3/traces/<id>`` with ``{"result": {"resourceSpans": [...]}}`` a streamed chunk,
    hex ids: pretty or on one line, a line per trace or an array of them, each stores what the request
    does."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    finished = sdk_task_spans(2, {"gen_ai.operation.name": "chat"})
    traces = [MessageToDict(encode_spans(finished[k : k + 2]))["resourceSpans"] for k in (0, 2)]
    assert "=" in traces[0][0]["scopeSpans"][0]["spans"][0]["traceId"]  # base64, not hex
    v1 = [{"batches": batches} for batches in traces]
    v2 = [{"trace": {"batches": batches}, "metrics": {"inspectedBytes": "1834"}} for batches in traces]
    jaeger = [
        {"result": {"resourceSpans": json.loads(json.dumps(batches), object_hook=_hex_ids)}}
        for batches in traces
    ]
    files = {
        "request.json": {"resourceSpans": traces[0] + traces[1]},
        "v1-pretty.json": json.dumps({"batches": traces[0] + traces[1]}, indent=2),
        "v1-lines.jsonl": "\n".join(json.dumps(answer) for answer in v1),
        "v2-lines.jsonl": "\n".join(json.dumps(answer) for answer in v2),
        "v2-array.json": v2,
        "jaeger-v3.jsonl": "\n".join(json.dumps(chunk) for chunk in jaeger),
        "jaeger-v3-pretty.json": json.dumps({"result": {"resourceSpans": traces[0] + traces[1]}}, indent=2),
    }
    tables = {}
    for name, content in files.items():
        (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content))
        with Store(None) as store:
            summary = ingest(store, [tmp_path / name])
            tables[name] = store.con.execute("SELECT * FROM spans ORDER BY span_id").fetchall()
        assert summary.ok and summary.stored == 4, (name, summary.problems)
    assert len(tables["request.json"]) == 4
    assert '"traceId": "' + tables["request.json"][0][0] in files["jaeger-v3.jsonl"]
    for name in set(files) - {"request.json"}:
        assert tables[name] == tables["request.json"], name
    (tmp_path / "odd.json").write_text(json.dumps({"trace": "missing", "metrics": {}}))
    with Store(None) as store:
        summary = ingest(store, [tmp_path / "odd.json"])
    assert [problem.reason for problem in summary.problems] == [
        "not an OTLP ExportTraceServiceRequest (no resourceSpans, nor Tempo's batches)"
    ]


def _hex_ids(value: dict) -> dict:
    """An OTLP JSON object with its base64 ids in hex, as Jaeger and the OTel Collector write them."""
    for key in ("traceId", "spanId", "parentSpanId"):
        if value.get(key):
            value[key] = base64.b64decode(value[key]).hex()
    return value


def test_agentscope_sdk_jsonl_round_trip_keeps_cpu_and_thread(tmp_path):
    path = tmp_path / "sdk.jsonl"
    ags.init(store=None, jsonl_path=path, instrument=False)

    @ags.task
    def job():
        search()

    @ags.tool
    def search():
        return 1

    job()
    ags.shutdown()
    with Store(None) as store:
        assert ingest(store, [path]).ok
        rows = store.con.execute(
            "SELECT name, kind, cpu_ns IS NOT NULL, thread_id IS NOT NULL FROM spans ORDER BY name"
        ).fetchall()
        assert rows == [("execute_tool search", "tool", True, True), ("job", "task", True, True)]
        assert "agentscope.cpu_ns" not in attrs(store, "job")


def test_ingest_is_idempotent_and_spans_may_precede_their_parent(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(dumps(agent_trace_otlp()) + "\n")  # children are listed before their parent
    b.write_text(dumps(agent_trace_otlp()) + "\n" + dumps(agent_trace_otlp("2" * 32)) + "\n")
    path = tmp_path / "store.duckdb"
    with Store(path) as store:
        first = ingest(store, [a])
        again = ingest(store, [a, b])
        assert (first.stored, again.stored, again.already_stored) == (3, 3, 6)
        assert store.span_count() == 6 and store.trace_count() == 2
    result = cli("blame", str(a), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tasks"]["count"] == 1


def test_another_store_file_is_merged_in_once(tmp_path):
    source = tmp_path / "trace.jsonl"
    source.write_text(dumps(agent_trace_otlp()) + "\n" + dumps(agent_trace_otlp("2" * 32)) + "\n")
    other, path = tmp_path / "other.duckdb", tmp_path / "store.duckdb"
    with Store(other) as store:
        assert ingest(store, [source]).stored == 6
    with Store(path) as store:
        assert ingest(store, [source]).stored == 6
        store.con.execute("DELETE FROM spans WHERE trace_id = ?", ["2" * 32]).fetchall()  # one trace stays
        merged = ingest(store, [other])
        assert merged.formats == {"store": 1}
        assert (merged.spans_read, merged.stored, merged.already_stored) == (6, 3, 3)
        assert store.span_count() == 6 and store.trace_count() == 2


BAD_LINES = [
    ("{not json", "invalid JSON"),
    (dumps(otlp_request([otlp_span(T1, "2" * 16, None, "x", 0, 1)]) | {"resourceSpans": "oops"}), None),
    (
        dumps(
            otlp_request(
                [
                    {
                        "spanId": "3" * 16,
                        "name": "no trace id",
                        "startTimeUnixNano": "1",
                        "endTimeUnixNano": "2",
                    }
                ]
            )
        ),
        "trace id",
    ),
    (dumps(otlp_request([otlp_span(T1, "4" * 16, None, "backwards", 10, 5)])), "ends before it starts"),
    (
        dumps(otlp_request([otlp_span(T1, "5" * 16, None, "x", 0, 1) | {"startTimeUnixNano": "soon"}])),
        "not an integer",
    ),
    (
        dumps(otlp_request([otlp_span(T1, "6" * 16, None, "x", 0, 1, [{"key": "a", "value": 3}])])),
        "not an AnyValue",
    ),
    (dumps(otlp_request([otlp_span(T1, "b7ad6b7169203331", None, "other name", 0, 1)])), "appears twice"),
    (dumps({"hello": "world"}), "no resourceSpans"),
]


def test_bad_lines_are_named_and_every_good_span_is_kept(tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = (
        [dumps(agent_trace_otlp())] + [line for line, _ in BAD_LINES] + [dumps(agent_trace_otlp("9" * 32))]
    )
    path.write_text("\n".join(lines) + "\n")
    with Store(None) as store:
        summary = ingest(store, [path])
        assert store.span_count() == 6
    assert not summary.ok
    found = {str(p) for p in summary.problems}
    for number, (_, reason) in enumerate(BAD_LINES, start=2):
        if reason:
            assert any(f"mixed.jsonl:{number}:" in p and reason in p for p in found), (number, reason, found)
    result = cli("ingest", str(path), "--store", str(tmp_path / "s.duckdb"))
    assert result.returncode == 2
    assert "mixed.jsonl:2: invalid JSON" in result.stderr and "spans stored (new)" in result.stdout
    assert "Traceback" not in result.stderr + result.stdout


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    lines = "".join(dumps(agent_trace_otlp(f"{n + 1:032x}")) + "\n" for n in range(200))
    data = gzip.compress(lines.encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    with Store(None) as store:
        summary = ingest(store, [path])
        kept = store.span_count()
    assert 0 < kept < 600 and kept % 3 == 0
    assert any("ends early" in str(p) for p in summary.problems)


def test_a_50_mb_attribute_is_cut_and_reported_not_loaded_whole(tmp_path):
    huge = "x" * (50 * 1024 * 1024)
    span = otlp_span(T1, "7" * 16, None, "big", 0, 1, [{"key": "prompt", "value": {"stringValue": huge}}])
    path = tmp_path / "huge.jsonl"
    path.write_text(dumps(agent_trace_otlp()) + "\n" + dumps(otlp_request([span])) + "\n")
    with Store(None) as store:
        summary = ingest(store, [path])
        assert store.span_count() == 4
        (size,) = store.con.execute("SELECT length(attributes) FROM spans WHERE name='big'").fetchall()[0]
    assert size < 2 * 1024 * 1024
    assert any("huge.jsonl:2: attribute value cut" in str(p) for p in summary.problems)


def test_an_ingest_writes_on_one_thread_and_gives_the_store_its_threads_back(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    path.write_text(dumps(agent_trace_otlp()) + "\n")
    seen = []
    insert = Store.insert

    def watched(self, batch):
        seen.append(self.con.execute("SELECT current_setting('threads')").fetchall()[0][0])
        return insert(self, batch)

    monkeypatch.setattr(Store, "insert", watched)
    with Store(tmp_path / "held.duckdb") as store:
        store.con.execute("SET threads = 3")
        assert ingest(store, [path]).stored == 3
        assert store.con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 3
    assert ingest(SharedStore(tmp_path / "shared.duckdb"), [path]).stored == 3
    assert seen == [1, 1]


def test_unknown_and_missing_files_are_reported(tmp_path):
    (tmp_path / "notes.txt").write_text("just text\n")
    (tmp_path / "empty.json").write_text("")
    with Store(None) as store:
        summary = ingest(store, [tmp_path, tmp_path / "nope.jsonl"])
    reasons = " | ".join(str(p) for p in summary.problems)
    assert "notes.txt: cannot read: a text file that is not JSON" in reasons
    assert "empty.json: cannot read: the file is empty" in reasons
    assert "nope.jsonl: no such file or folder" in reasons


def _written(store_path: Path) -> int:
    """Bytes an ingest has written to the store: an ingest keeps the file between batches and
    checkpoints its log into it only now and then, so its progress shows in the log first."""
    wal = store_path.with_name(store_path.name + ".wal")
    return sum(p.stat().st_size for p in (store_path, wal) if p.exists())


def test_a_killed_ingest_leaves_whole_batches_and_can_be_redone(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as out:
        for n in range(30_000):
            out.write(dumps(agent_trace_otlp(f"{n + 1:032x}")) + "\n")
    store_path = tmp_path / "killed.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", "ingest", str(path), "--store", str(store_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _written(store_path) < 2_000_000:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with Store(store_path) as store:
        partial = store.span_count()
    assert partial < 90_000 and partial % BATCH_ROWS == 0, partial  # whole batches only
    result = cli("ingest", str(path), "--store", str(store_path))
    assert result.returncode == 0, result.stderr
    with Store(store_path, read_only=True) as store:
        assert store.span_count() == 90_000


def test_ctrl_c_stops_ingest_with_whole_batches_and_no_traceback(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as out:
        for n in range(30_000):
            out.write(dumps(agent_trace_otlp(f"{n + 1:032x}")) + "\n")
    store_path = tmp_path / "interrupted.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", "ingest", str(path), "--store", str(store_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _written(store_path) < 500_000 and process.poll() is None:
        time.sleep(0.01)  # the first batch of three is in: interrupt the second
    for _ in range(3):  # a Ctrl-C that lands as DuckDB ends a parse query can be lost: press it again
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=1)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        out, err = process.communicate(timeout=120)
    assert process.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in out + err
    with Store(store_path, read_only=True) as store:
        partial = store.span_count()
    assert 0 < partial < 90_000 and partial % BATCH_ROWS == 0, partial


def test_bad_lines_get_the_same_problems_whichever_reader_took_the_good_ones(tmp_path, monkeypatch):
    from agentscope.ingest import otlp_duckdb

    lines = [dumps(agent_trace_otlp(f"{n + 1:032x}")) for n in range(400)]
    lines[57] = "{broken"
    lines[311] = dumps(otlp_request([otlp_span(T1, "4" * 16, None, "backwards", 10, 5)]))
    lines[200] = dumps(otlp_request([otlp_span(T1, "5" * 16, None, "plain", 10, 20)]))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    with Store(None) as store:
        mixed = ingest(store, [path])
        expected = store.span_count()
    monkeypatch.setattr(otlp_duckdb, "ROUTED_MARKERS", (b"",))  # every line to the Python reader
    with Store(None) as store:
        python_only = ingest(store, [path])
        assert store.span_count() == expected == 397 * 3 + 1
    assert (mixed.spans_read, mixed.stored) == (python_only.spans_read, python_only.stored)
    assert sorted(map(str, mixed.problems)) == sorted(map(str, python_only.problems))
    assert any(":58: invalid JSON" in str(p) for p in mixed.problems)
    assert any(":312: ends before it starts" in str(p) for p in mixed.problems)
