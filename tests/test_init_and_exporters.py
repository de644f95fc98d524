"""ags.init with and without an application tracer provider, and each exporter's output."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import duckdb
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult

import agentscope as ags
from agentscope.sdk.collector import EXPORTER_LOGGER
from agentscope.store import SCHEMA_VERSION, Store
from agentscope.store.schema import COLUMN_NAMES, TYPED_NAMES, rows_to_table


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_init_installs_a_provider_when_the_app_has_none(tmp_path):
    out = run_python(
        f"""
        import duckdb, agentscope as ags
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        ags.init(service_name="svc-a", store={str(tmp_path / "a.duckdb")!r})
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)

        @ags.tool
        def work():
            return 1

        work()
        ags.shutdown()
        print(duckdb.connect({str(tmp_path / "a.duckdb")!r}).execute(
            "select name, kind, service from spans").fetchall())
        """
    )
    assert "[('execute_tool work', 'tool', 'svc-a')]" in out


def test_init_joins_the_apps_own_provider_without_replacing_it(tmp_path):
    out = run_python(
        f"""
        import duckdb, agentscope as ags
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        app_exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({{"service.name": "app-svc"}}))
        provider.add_span_processor(SimpleSpanProcessor(app_exporter))
        trace.set_tracer_provider(provider)

        ags.init(service_name="ignored", store={str(tmp_path / "b.duckdb")!r})
        assert trace.get_tracer_provider() is provider

        app_tracer = trace.get_tracer("app")

        @ags.task
        def job():
            with app_tracer.start_as_current_span("app-span"):
                pass

        job()
        ags.shutdown()
        print(sorted(s.name for s in app_exporter.get_finished_spans()))
        print(duckdb.connect({str(tmp_path / "b.duckdb")!r}).execute(
            "select name, service from spans order by name").fetchall())
        """
    )
    assert "['app-span', 'job']" in out
    assert "[('app-span', 'app-svc'), ('job', 'app-svc')]" in out


def test_a_provider_made_global_after_init_is_joined_and_its_shutdown_leaves_agentscope_recording(tmp_path):
    """OpenTelemetry refuses a second global provider (Phoenix's ``register()`` after ``ags.init``, say):
    agentscope joins it, once however often it is set, so its spans reach the store in the task's trace,
    and hands it the spans of the provider agentscope set, so its own exporter sees the whole trace; its
    owner shutting it down does not close agentscope's store."""
    out = run_python(
        f"""
        import duckdb, agentscope as ags
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        ags.init(service_name="svc", store={str(tmp_path / "late.duckdb")!r}, instrument=False)
        late = TracerProvider()
        trace.set_tracer_provider(late)
        trace.set_tracer_provider(late)
        assert trace.get_tracer_provider() is not late
        theirs = InMemorySpanExporter()
        late.add_span_processor(SimpleSpanProcessor(theirs))
        peer = late.get_tracer("peer")

        @ags.task
        def job():
            with peer.start_as_current_span("peer-call"):
                with ags.span("inside"):
                    pass

        job()
        print(sorted(span.name for span in theirs.get_finished_spans()))
        late.shutdown()
        job()
        ags.shutdown()
        print(duckdb.connect({str(tmp_path / "late.duckdb")!r}).execute(
            "select name, count(*), count(distinct trace_id) from spans group by name order by name"
        ).fetchall())
        """
    )
    assert out.splitlines()[0] == "['inside', 'job', 'peer-call']"
    assert "[('inside', 2, 2), ('job', 2, 2), ('peer-call', 2, 2)]" in out


def test_a_late_providers_failing_processor_breaks_neither_the_app_nor_the_store(tmp_path):
    """A processor of the provider agentscope hands its spans to that raises is said once through the
    ``agentscope`` logger; the app's code runs on and every span is stored."""
    out = run_python(
        f"""
        import logging, duckdb, agentscope as ags
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        said = []
        handler = logging.Handler()
        handler.emit = lambda record: said.append(record.getMessage())
        logging.getLogger("agentscope").addHandler(handler)

        class Broken(SpanProcessor):
            def on_start(self, span, parent_context=None):
                raise RuntimeError("broken on_start")

            def on_end(self, span):
                raise RuntimeError("broken on_end")

        ags.init(service_name="svc", store={str(tmp_path / "broken.duckdb")!r}, instrument=False)
        late = TracerProvider()
        trace.set_tracer_provider(late)
        late.add_span_processor(Broken())

        @ags.task
        def job():
            with ags.span("inside"):
                return 7

        print([job() for _ in range(3)])
        ags.shutdown()
        print(len(said), "broken on_start" in said[0])
        stored = duckdb.connect({str(tmp_path / "broken.duckdb")!r})
        print(stored.execute("select count(*) from spans").fetchone())
        """
    )
    assert out.splitlines() == ["[7, 7, 7]", "1 True", "(6,)"]


def test_init_twice_switches_stores_and_flushes_the_first(tmp_path):
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"

    @ags.step
    def work():
        return 1

    ags.init(store=first, instrument=False)
    work()
    ags.init(store=second, instrument=False)
    work()
    work()
    ags.shutdown()
    with Store(first) as a, Store(second) as b:
        assert (a.span_count(), b.span_count()) == (1, 2)


def test_store_schema_version_and_columns(tmp_path):
    path = tmp_path / "s.duckdb"
    ags.init(store=path, instrument=False)

    @ags.task
    def job():
        pass

    job()
    ags.shutdown()
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("select value from agentscope_meta where key='schema_version'").fetchall() == [
        (str(SCHEMA_VERSION),)
    ]
    columns = [row[0] for row in con.execute("describe spans").fetchall()]
    assert tuple(columns) == COLUMN_NAMES + TYPED_NAMES
    (row,) = con.execute(
        "select trace_id, span_id, parent_id, kind, status, cpu_ns, thread_id, task_name, label from spans"
    ).fetchall()
    assert len(row[0]) == 32 and len(row[1]) == 16 and row[2] is None
    assert row[3] == "task" and row[4] == "UNSET" and row[5] >= 0 and row[6] > 0
    assert row[7] == row[8] == "job"  # typed as it was stored


def test_same_span_written_twice_is_stored_once(tmp_path):
    rows = [("a" * 32, "b" * 16, None, "n", "step", "INTERNAL", 1, 2, "OK", None, "svc", None, 1, 5, "{}")]
    with Store(tmp_path / "i.duckdb") as store:
        assert store.insert(rows_to_table(rows)).added == 1
        assert store.insert(rows_to_table(rows)).added == 0
        assert store.span_count() == 1


def test_paths_that_start_at_the_home_folder_are_expanded(tmp_path, monkeypatch):
    """store="~/…" made a folder named "~" (or failed: its parent was missing), and so did
    AGENTSCOPE_STORE=~/… given by a .env file or a container, which no shell expands."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # where a folder named "~" would be made
    ags.init(store="~/own.duckdb", jsonl_path="~/spans.jsonl", instrument=False)
    ags.task("from_code")(lambda: None)()
    monkeypatch.setenv("AGENTSCOPE_STORE", "~/from_env.duckdb")
    ags.init(instrument=False)  # flushes the first store, then writes to the default one
    ags.task("from_env")(lambda: None)()
    ags.shutdown()
    for store, name in (("own.duckdb", "from_code"), ("from_env.duckdb", "from_env")):
        with Store(tmp_path / store, read_only=True) as opened:
            assert opened.con.execute("SELECT name FROM spans").fetchall() == [(name,)]
    (line,) = (tmp_path / "spans.jsonl").read_text().splitlines()
    assert '"name":"from_code"' in line
    assert not (tmp_path / "~").exists()


def test_jsonl_file_is_otlp_json_lines(tmp_path):
    path = tmp_path / "spans.jsonl"
    ags.init(store=None, jsonl_path=path, instrument=False)

    @ags.task
    def job():
        tool(3)

    @ags.tool
    def tool(x):
        return x

    job()
    ags.shutdown()
    lines = path.read_text().splitlines()
    spans = [
        span
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) == {"job", "execute_tool tool"}
    tool_span = by_name["execute_tool tool"]
    assert tool_span["parentSpanId"] == by_name["job"]["spanId"]
    assert len(tool_span["traceId"]) == 32 and tool_span["startTimeUnixNano"].isdigit()
    keys = {kv["key"]: kv["value"] for kv in tool_span["attributes"]}
    assert keys["gen_ai.operation.name"] == {"stringValue": "execute_tool"}
    assert by_name["job"]["attributes"][0]["key"] in {"agentscope.task.name", "agentscope.kind"}
    assert "intValue" in keys["agentscope.cpu_ns"]


class _Collector(BaseHTTPRequestHandler):
    bodies: typing.ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        type(self).bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def _received(bodies: list[tuple[str, bytes]]) -> list:
    """The spans of the OTLP/HTTP requests a collector received (each to ``/v1/traces``)."""
    spans = []
    for path, body in bodies:
        assert path == "/v1/traces"
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
            spans += [span for ss in rs.scope_spans for span in ss.spans]
    return spans


def test_otlp_http_export_reaches_a_collector():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ags.init(store=None, otlp_endpoint=f"http://127.0.0.1:{server.server_port}", instrument=False)

        @ags.llm(model="gpt-oss-120b")
        def chat():
            ags.current_llm().usage(input_tokens=7, output_tokens=3)

        chat()
        ags.shutdown()
    finally:
        server.shutdown()
    names = [(s.name, {kv.key for kv in s.attributes}) for s in _received(_Collector.bodies)]
    assert len(names) == 1
    name, keys = names[0]
    assert name == "chat gpt-oss-120b"
    assert {"gen_ai.usage.input_tokens", "gen_ai.operation.name", "agentscope.cpu_ns"} <= keys


def _closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_collector_that_is_down_is_said_once_and_the_exit_waits_no_longer_than_its_timeout():
    """OpenTelemetry's exporter logs every failed attempt of every batch; agentscope's says the first
    failure once, through the agentscope logger.  The exporter's timeout bounds the wait at exit (the
    knob docs/api.md names)."""
    closed = _closed_port()
    code = f"""
        import logging
        logging.basicConfig(format="%(name)s: %(message)s")
        import agentscope as ags
        ags.init(service_name="app", store=None, otlp_endpoint="http://127.0.0.1:{closed}", instrument=False)
        for _ in range(3):
            with ags.span("work", kind="step"):
                pass
            ags.flush(timeout_millis=10_000)
        """
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1"}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 15
    said = [line for line in result.stderr.splitlines() if line.startswith("agentscope:")]
    assert len(said) == 1, result.stderr
    assert f"exporting spans to http://127.0.0.1:{closed}/v1/traces failed" in said[0]
    assert "ConnectionError: 1 span(s) not exported: " in said[0]
    assert "opentelemetry" not in result.stderr and "Traceback" not in result.stderr


class _Refusing(BaseHTTPRequestHandler):
    """A collector that refuses every request as malformed (not retried by the exporter)."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(400)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_collector_that_refuses_the_spans_is_said_once_with_its_answer(caplog):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}/v1/traces"
    try:
        ags.init(store=None, otlp_endpoint=endpoint, instrument=False)
        for _ in range(2):
            with ags.span("work", kind="step"):
                pass
            ags.flush()
        apps_own = OTLPSpanExporter(endpoint=endpoint)  # the same refusal, to the app's own exporter
        assert apps_own.export([]) is SpanExportResult.FAILURE
        ags.shutdown()
    finally:
        server.shutdown()
    where = f"exporting spans to {endpoint}"
    said = [r.getMessage() for r in caplog.records if where in r.getMessage()]
    assert len(said) == 1 and "400" in said[0]
    exporters_own = [r.getMessage() for r in caplog.records if r.name == EXPORTER_LOGGER]
    assert len(exporters_own) == 1 and "400" in exporters_own[0]  # the app's, not agentscope's two


class _App(_Collector):
    """A collector that also answers the app's own GET requests."""

    bodies: typing.ClassVar[list[tuple[str, bytes]]] = []

    def do_GET(self):
        self.send_response(204)
        self.end_headers()


def test_an_exporters_own_requests_are_not_traced_and_the_apps_are():
    """Instrumented ``requests`` beside the OTLP/HTTP exporter (which sends with ``requests``): each export
    ran inside a traced POST, exported by the next, without end, and ``flush`` never returned.  The SDK
    marks its exports "suppress instrumentation", as a block of the app's own may be."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _App)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        run_python(
            f"""
            import time, requests
            from opentelemetry.instrumentation.utils import suppress_instrumentation
            import agentscope as ags
            ags.init(service_name="app", store=None, otlp_endpoint="{url}")

            @ags.task("fetch")
            def fetch():
                requests.get("{url}/traced")
                with suppress_instrumentation():
                    requests.get("{url}/quiet")

            fetch()
            for _ in range(4):
                assert ags.flush(timeout_millis=10_000)
                time.sleep(0.2)
            ags.shutdown()
            """
        )
    finally:
        server.shutdown()
    assert sorted(span.name for span in _received(_App.bodies)) == ["GET 127.0.0.1", "fetch"]


def test_a_provider_that_takes_no_processor_is_said_once_and_our_spans_still_stored(tmp_path):
    """A no-op global provider cannot be joined: one warning naming it and what to do; the store still
    gets agentscope's own spans (in a process of its own: the global provider is set once)."""
    script = (
        "import logging, sys\n"
        "from opentelemetry import trace\n"
        "trace.set_tracer_provider(trace.NoOpTracerProvider())\n"
        "import agentscope as ags\n"
        "ags.init(service_name='svc', store=sys.argv[1], instrument=False)\n"
        "ags.init(service_name='svc', store=sys.argv[1], instrument=False)\n"
        "with ags.span('work', kind='step'):\n"
        "    pass\n"
        "ags.shutdown()\n"
    )
    store = tmp_path / "s.duckdb"
    result = subprocess.run(
        [sys.executable, "-c", script, str(store)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "NoOpTracerProvider" in line]
    assert len(warnings) == 1 and "takes no span processor" in warnings[0]
    assert "set an OpenTelemetry SDK TracerProvider" in result.stderr
    with Store(store, read_only=True) as opened:
        assert opened.con.execute("SELECT name FROM spans").fetchall() == [("work",)]
