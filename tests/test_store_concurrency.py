"""One store, many processes (DESIGN §11), against real DuckDB files and real separate processes."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path

import clirun
import pytest
import store_workers

import agentscope as ags
from agentscope.sim.server import free_port
from agentscope.store import Store
from agentscope.store.schema import rows_to_table
from agentscope.store.shared import READ_WAIT_S, SharedStore
from agentscope.store.writer import StoreSpanProcessor

cli = partial(clirun.cli, columns=160, timeout=120)

SPAWN = multiprocessing.get_context("spawn")


def stored(path: Path) -> int:
    with SharedStore(path).reading() as store:
        return store.span_count()


def test_four_worker_processes_lose_no_span(tmp_path):
    path = tmp_path / "workers.duckdb"
    workers = [SPAWN.Process(target=store_workers.write_tasks, args=(str(path), 10_000)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    assert stored(path) == 4 * 20_000
    SharedStore(path).insert(rows_to_table([]))  # and in the file itself, once any spool is loaded
    with Store(path, read_only=True) as store:
        assert store.span_count() == 80_000
        assert store.scalar("SELECT count(DISTINCT service) FROM spans") == 4
    assert SharedStore(path).spooled() == []


def test_readers_never_fail_while_two_processes_write_and_see_what_was_flushed(tmp_path):
    path = tmp_path / "live.duckdb"
    progress = [tmp_path / f"progress-{n}" for n in range(2)]
    workers = store_workers.start_writers(path, progress, 6_000, 500)
    reads = 0
    try:
        for round_ in range(6):
            flushed = store_workers.flushed(progress)
            blame = cli("blame", "--store", str(path), "--format", "json")
            assert blame.returncode == 0, blame.stderr
            assert json.loads(blame.stdout)["tasks"]["count"] >= flushed
            budget = cli("budget", "--store", str(path), "--format", "json")
            assert budget.returncode == 0, budget.stderr
            with SharedStore(path).reading() as store:
                (trace,) = store.con.execute("SELECT trace_id FROM spans LIMIT 1").fetchone()
            show = cli("show", trace, "--store", str(path), "--format", "json")
            assert show.returncode == 0, show.stderr
            reads += 3
            if not any(worker.is_alive() for worker in workers) and round_ >= 2:
                break
    finally:
        for worker in workers:
            worker.join(timeout=300)
    assert all(worker.exitcode == 0 for worker in workers)
    assert reads >= 9
    assert stored(path) == 2 * 2 * 6_000


@pytest.fixture
def server(tmp_path):
    """``agentscope serve`` in its own process, with a bearer token."""
    path, port, token = tmp_path / "served.duckdb", free_port(), "s3cret-token"
    url = f"http://127.0.0.1:{port}/v1/traces"
    process = clirun.serving(
        "serve", "--port", str(port), "--store", str(path), ready=url, env={"AGENTSCOPE_TOKEN": token}
    )
    yield path, url, token, process
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def test_serve_receives_from_four_exporters_while_blame_runs_and_loses_nothing(server, monkeypatch):
    path, url, token, process = server
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{token}")
    exporters = [
        SPAWN.Process(target=store_workers.export_over_otlp, args=(url, 2_500, f"app-{n}")) for n in range(4)
    ]
    for exporter in exporters:
        exporter.start()
    blames = 0
    while any(exporter.is_alive() for exporter in exporters) or blames < 3:
        result = cli("blame", "--store", str(path), "--format", "json")
        assert result.returncode in (0, 1), result.stderr  # 1: no task stored yet
        assert "Traceback" not in result.stderr and "lock" not in result.stderr.lower()
        blames += 1
        if blames >= 20:
            break
    for exporter in exporters:
        exporter.join(timeout=300)
        assert exporter.exitcode == 0
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert "20,000 spans received" in err
    assert stored(path) == 4 * 2_500 * 2


def test_serve_wants_its_token(server):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    path, url, token, _ = server
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("resolve"):
        pass
    spans = memory.get_finished_spans()
    refused = OTLPSpanExporter(endpoint=url).export(spans)
    accepted = OTLPSpanExporter(endpoint=url, headers={"authorization": f"Bearer {token}"}).export(spans)
    assert (refused.name, accepted.name) == ("FAILURE", "SUCCESS")
    request = urllib.request.Request(url, data=b"", headers={"Authorization": "Bearer wrong"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=10)
    assert error.value.code == 401
    assert stored(path) == 1


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "AGENTSCOPE_TOKEN"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentscope.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--store",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2
    assert "--token" in result.stderr and "AGENTSCOPE_TOKEN" in result.stderr
    assert not (tmp_path / "s").exists()


def test_a_writer_killed_mid_write_leaves_a_store_that_opens_with_whole_batches(tmp_path):
    path, started = tmp_path / "killed.duckdb", tmp_path / "started"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import store_workers; store_workers.insert_big_batches({str(path)!r}, {str(started)!r})",
        ],
        cwd=Path(__file__).parent,
    )
    deadline = time.monotonic() + 120
    while not (started.exists() and started.read_text() >= "2") and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.15)  # inside the next batch's write
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    SharedStore(path).insert(rows_to_table([]))  # the next writer gets the file
    with Store(path, read_only=True) as store:
        count = store.span_count()
    assert count >= 200_000 and count % 100_000 == 0


def test_spilled_batches_survive_a_sigkill_and_the_next_writer_loads_them(tmp_path):
    path = tmp_path / "spilled.duckdb"
    shared = SharedStore(path)
    shared.insert(rows_to_table([]))
    with shared.writing():  # another process holds the file for longer than the app's shutdown waits
        app = SPAWN.Process(target=store_workers.write_tasks, args=(str(path), 1_000))
        app.start()
        deadline = time.monotonic() + 60
        while not shared.spooled() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(app.pid, signal.SIGKILL)  # right after it spilled
        app.join(timeout=30)
    assert shared.spooled()
    assert stored(path) == 2_000  # readers see spilled batches at once
    shared.insert(rows_to_table([]))
    assert shared.spooled() == []
    with Store(path, read_only=True) as store:
        assert store.span_count() == 2_000


@pytest.fixture
def tiny_disk(tmp_path):
    """A 3 MB file system, so the spool runs out of room."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)]).returncode != 0:
        if os.environ.get("AGENTSCOPE_REQUIRE_SERVICES") == "1":
            pytest.fail("cannot mount a small tmpfs (needs root)")
        pytest.skip("cannot mount a small tmpfs (needs root)")
    yield mount
    subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_full_spool_is_counted_and_reported_once_and_the_app_is_unharmed(tiny_disk, caplog):
    path = tiny_disk / "full.duckdb"
    SharedStore(path).insert(rows_to_table([]))
    processor = StoreSpanProcessor(path, memory_rows=200, lock_wait_s=0.01, flush_interval_s=0.01)
    ags.init(store=None, instrument=False, span_processors=[processor])
    try:
        with SharedStore(path).writing(), caplog.at_level(logging.WARNING, logger="agentscope"):

            @ags.tool
            def lookup(i: int) -> str:
                return "x" * 200 + str(i)

            results = []
            for i in range(20_000):
                with ags.span("step", kind="step", payload="y" * 300):
                    results.append(lookup(i))
            assert len(results) == 20_000 and results[7] == "x" * 200 + "7"
            ags.flush()
    finally:
        ags.shutdown()
    assert processor.dropped > 0 and processor.spilled > 0
    spill_warnings = [r for r in caplog.records if "spilling spans" in r.getMessage()]
    assert len(spill_warnings) == 1


def test_a_read_only_disk_is_counted_and_reported_once_and_the_app_is_unharmed(tiny_disk, caplog):
    path = tiny_disk / "frozen.duckdb"
    SharedStore(path).insert(rows_to_table([]))
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    processor = StoreSpanProcessor(path, memory_rows=100, lock_wait_s=0.01, flush_interval_s=0.01)
    ags.init(store=None, instrument=False, span_processors=[processor])
    try:
        with caplog.at_level(logging.WARNING, logger="agentscope"):
            assert [ags.tool(lambda i: i + 1)(i) for i in range(2_000)] == list(range(1, 2_001))
            ags.flush()
    finally:
        ags.shutdown()
    assert processor.dropped == 2_000 and processor.spilled == 0
    messages = [r.getMessage() for r in caplog.records]
    assert sum("spilling spans" in m for m in messages) == 1
    assert sum("writing spans to the store" in m for m in messages) == 1


def test_an_ingest_keeps_the_file_between_batches_only_while_nobody_waits(tmp_path):
    from orjson import dumps
    from traces_fixtures import agent_trace_otlp

    source = tmp_path / "big.jsonl"
    with source.open("wb") as out:
        for n in range(60_000):
            out.write(dumps(agent_trace_otlp(f"{n + 1:032x}")) + b"\n")
    path = tmp_path / "ingested.duckdb"
    shared = SharedStore(path)
    shared.insert(rows_to_table([]))
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", "ingest", str(source), "--store", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    waits, counts = [], []
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        started = time.perf_counter()
        with shared.reading() as store:
            waits.append(time.perf_counter() - started)
            counts.append(store.span_count())
        time.sleep(0.1)
    assert process.wait(timeout=300) == 0, process.stderr.read()
    # A reader waits about one batch, never for the run: a file held past READ_WAIT_S would make it give
    # up waiting and copy without the lock, so every wait stays under that (a loaded machine's batch
    # write has taken 1.52 s).
    assert len(waits) >= 3 and max(waits) < READ_WAIT_S, waits
    assert counts == sorted(counts) and max(counts) > 0  # readers saw the ingest progress, batch by batch
    assert stored(path) == 180_000
