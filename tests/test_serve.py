"""agentscope serve: real OTel SDK exporters, JSON and protobuf bodies, limits and bad bodies."""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator

import pytest
import uvicorn
from clirun import cli
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from traces_fixtures import T1, agent_trace_otlp, otlp_request, otlp_span

from agentscope.ingest.receiver import Receiver
from agentscope.sim.server import free_port
from agentscope.store import Store


@contextlib.contextmanager
def serving(receiver: Receiver) -> Iterator[Receiver]:
    """``receiver`` answering on a loopback port (its ``url``) in a thread, closed afterwards."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(receiver.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    receiver.url = f"http://127.0.0.1:{port}/v1/traces"
    try:
        yield receiver
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        receiver.close()


@pytest.fixture
def receiver(tmp_path):
    with serving(Receiver(tmp_path / "received.duckdb", max_body=1_000_000)) as running:
        yield running


def post(url: str, body: bytes, content_type: str, encoding: str | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def count(receiver: Receiver) -> int:
    """Spans stored once the writer has caught up (an empty write queued behind the others)."""
    return int(stored(receiver, "SELECT count(*) FROM spans")[0][0])


def stored(receiver: Receiver, sql: str) -> list[tuple]:
    """A query on the receiver's store, read as any other process would while it runs."""
    receiver.writer.submit([]).result(timeout=30)
    with receiver.store.reading() as store:
        return store.con.execute(sql).fetchall()


def test_eight_real_exporters_in_threads_lose_no_span(receiver):
    per_exporter = 2_500

    def produce(n: int) -> None:
        provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{n}"}))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url), max_queue_size=per_exporter * 2)
        )
        tracer = provider.get_tracer("load")
        for k in range(per_exporter // 2):
            with (
                tracer.start_as_current_span(f"task {n}-{k}", attributes={"agentscope.kind": "task"}),
                tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}),
            ):
                pass
        provider.shutdown()

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert count(receiver) == 8 * per_exporter
    assert stored(receiver, "SELECT count(DISTINCT service) FROM spans") == [(8,)]


def test_json_and_gzip_bodies_and_partial_success(receiver):
    status, body = post(receiver.url, json.dumps(agent_trace_otlp()).encode(), "application/json")
    assert (status, json.loads(body)) == (200, {})
    bad = otlp_span(T1, "4" * 16, None, "backwards", 10, 5)
    good = otlp_span("3" * 32, "5" * 16, None, "fine", 0, 5)
    status, body = post(
        receiver.url,
        gzip.compress(json.dumps(otlp_request([bad, good])).encode()),
        "application/json",
        "gzip",
    )
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "ends before it starts" in partial["errorMessage"]
    assert count(receiver) == 4


def test_metrics_and_logs_from_the_apps_exporters_are_acknowledged_and_not_kept(receiver, caplog):
    """An SDK given the generic OTLP endpoint sends every signal there: its metrics and logs exporters
    succeed (no export failure logged each minute), its spans are stored, and nothing else is."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    base = receiver.url.removesuffix("/traces")
    meters = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter(f"{base}/metrics"))]
    )
    meters.get_meter("app").create_counter("tickets").add(3)
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(f"{base}/logs")))
    app_log = logging.getLogger("app.tickets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the handler is moving to a contrib package
        handler = LoggingHandler(logger_provider=logs)
    app_log.addHandler(handler)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url)))
    with caplog.at_level(logging.WARNING, logger="opentelemetry"):
        with tracer_provider.get_tracer("app").start_as_current_span("handle ticket"):
            app_log.warning("ticket %s escalated", 7)
        assert meters.force_flush() and tracer_provider.force_flush()
        meters.shutdown()
        logs.shutdown()
        tracer_provider.shutdown()
    app_log.removeHandler(handler)
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]
    assert dict(receiver.dropped) == {"metrics": 2, "logs": 1}  # the flush's and the shutdown's
    assert stored(receiver, "SELECT name FROM spans") == [("handle ticket",)]
    with urllib.request.urlopen(base.removesuffix("v1"), timeout=10) as response:
        assert response.read().decode() == (
            "agentscope receiver: 1 spans received; 1 logs requests dropped; 2 metrics requests dropped\n"
        )
    assert post(f"{base}/logs", b"{}", "text/plain")[0] == 415


def test_a_span_sent_again_is_stored_once_and_a_changed_one_is_reported(receiver):
    request = json.dumps(agent_trace_otlp()).encode()
    assert post(receiver.url, request, "application/json") == (200, b"{}")
    assert post(receiver.url, request, "application/json") == (200, b"{}")
    changed = agent_trace_otlp()
    changed["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] = "renamed"
    status, body = post(receiver.url, json.dumps(changed).encode(), "application/json")
    partial = json.loads(body)["partialSuccess"]
    assert status == 200 and partial["rejectedSpans"] == "1"
    assert "already stored with different content; kept the stored one" in partial["errorMessage"]
    assert count(receiver) == 3
    names = {name for (name,) in stored(receiver, "SELECT name FROM spans")}
    assert "renamed" not in names


def test_protobuf_response_and_bad_bodies_do_not_stop_the_server(receiver):
    status, body = post(receiver.url, b"\x0a\x05garbage-not-protobuf", "application/x-protobuf")
    assert status == 400 and b"invalid protobuf" in body
    status, body = post(receiver.url, b"{nope", "application/json")
    assert status == 400 and b"invalid JSON" in body
    assert post(receiver.url, b"{}", "application/json") == (200, b"{}")  # empty, as b"" in protobuf
    status, body = post(receiver.url, b'{"data": []}', "application/json")
    assert status == 400 and b"no resourceSpans" in body
    status, _ = post(receiver.url, b"x" * 1_000_001, "application/json")
    assert status == 413
    status, _ = post(receiver.url, gzip.compress(b" " * 2_000_000), "application/json", "gzip")
    assert status == 413
    status, body = post(receiver.url, b"", "application/x-protobuf")
    assert status == 200
    ExportTraceServiceResponse.FromString(body)
    status, _ = post(receiver.url, json.dumps(agent_trace_otlp()).encode(), "application/json")
    assert status == 200 and count(receiver) == 3
    with urllib.request.urlopen(receiver.url.removesuffix("v1/traces"), timeout=10) as response:
        assert b"3 spans received" in response.read()


def test_the_store_file_is_free_between_writes_while_the_receiver_runs(receiver):
    post(receiver.url, json.dumps(agent_trace_otlp()).encode(), "application/json")
    assert count(receiver) == 3
    with Store(receiver.store.path, read_only=True) as store:  # DuckDB itself, no agentscope lock taken
        assert store.span_count() == 3


def test_serve_and_ui_on_a_port_in_use_say_so_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in ("serve", "ui"):
            result = cli(command, "--port", str(port), "--store", str(tmp_path / "s.duckdb"), timeout=60)
            assert result.returncode == 2, result.stderr
            in_use = os.strerror(errno.EADDRINUSE)
            assert result.stderr == f"error: cannot listen on 127.0.0.1:{port}: {in_use}\n"
    assert not (tmp_path / "s.duckdb").exists()


def test_serve_on_port_0_names_the_port_it_was_given(tmp_path):
    """``--port 0`` lets the system choose; the banner names the port an exporter must use."""
    store = tmp_path / "s.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", "serve", "--port", "0", "--store", str(store)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    try:
        banner = process.stderr.readline()
        url = re.search(r"on (http://127\.0\.0\.1:(\d+)/v1/traces) ", banner)
        assert url and int(url.group(2)) > 0, banner
        body = json.dumps(otlp_request([otlp_span(T1, "1" * 16, None, "task", 0, 10)])).encode()
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(url.group(1), data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        assert post(url.group(1).replace("traces", "logs"), b"{}", "application/json") == (200, b"{}")
    finally:
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=30)
    assert process.returncode == 0, rest
    assert "1 spans received; requests of other signals acknowledged and not kept: 1 logs" in rest
