"""Retention: old traces go with their task rows, whole, and the file gives the disk back."""

from __future__ import annotations

import json
import signal
import time
import urllib.request

import duckdb
from clirun import cli, serving
from test_task_table import _full, _rows

from agentscope.analysis.pipeline import blame_store
from agentscope.sim.server import free_port
from agentscope.store.schema import rows_to_table
from agentscope.store.shared import SharedStore

MS = 1_000_000


def _counts(path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = ("spans", "tasks", "task_traces", "trace_writes")
        return {t: con.execute(f"SELECT count(DISTINCT trace_id) FROM {t}").fetchone()[0] for t in tables}
    finally:
        con.close()


def test_prune_deletes_whole_old_traces_with_their_rows(tmp_path):
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(9, 11)  # traces start 5 s apart and last a few seconds
    shared.insert(rows_to_table(rows))
    blame_store(shared)  # rows kept for all nine
    ends: dict[str, int] = {}
    for row in rows:
        ends[row[0]] = max(ends.get(row[0], 0), row[7])
    cutoff = sorted(ends.values())[3] + 1  # after the fourth trace's end: four traces ended before it
    straddling = [t for t in ends if min(r[6] for r in rows if r[0] == t) < cutoff <= ends[t]]
    traces, spans = shared.prune(cutoff)
    assert traces == 4 and spans == sum(1 for r in rows if ends[r[0]] < cutoff)
    left = _counts(shared.path)
    assert left == {"spans": 5, "tasks": 5, "task_traces": 5, "trace_writes": 5}
    with duckdb.connect(str(shared.path), read_only=True) as con:
        kept = {t for (t,) in con.execute("SELECT DISTINCT trace_id FROM spans").fetchall()}
    assert set(straddling) <= kept  # a trace that began before the cutoff but ended after stays whole
    assert blame_store(shared) == _full(shared, None)
    assert blame_store(shared)["tasks"]["count"] == 5


def test_the_prune_command_gives_the_disk_back(tmp_path):
    path = tmp_path / "store.duckdb"
    shared = SharedStore(path)
    for seed in range(8):
        shared.insert(rows_to_table(_rows(40, seed)))  # 320 traces in all, their ids drawn per seed
    size = path.stat().st_size
    kept = cli("prune", "--before", "2001-01-01", "--store", str(path), "--no-compact")
    assert kept.returncode == 0, kept.stderr
    assert "pruned 0 traces (0 spans)" in kept.stdout
    done = cli("prune", "--before", "2030-01-01", "--store", str(path))
    assert done.returncode == 0, done.stderr
    assert "pruned 320 traces" in done.stdout
    assert path.stat().st_size < size / 2
    assert _counts(path) == {"spans": 0, "tasks": 0, "task_traces": 0, "trace_writes": 0}
    bad = cli("prune", "--before", "last tuesday", "--store", str(path))
    assert bad.returncode == 2 and "--before 'last tuesday'" in bad.stderr and "Traceback" not in bad.stderr


def _span(trace: str, span: str, parent: str | None, kind: str, start_ns: int, end_ns: int) -> dict:
    out = {
        "traceId": trace,
        "spanId": span,
        "name": kind,
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": [{"key": "agentscope.kind", "value": {"stringValue": kind}}],
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def test_serve_retain_prunes_as_it_runs(tmp_path):
    path, port = tmp_path / "served.duckdb", free_port()
    url = f"http://127.0.0.1:{port}/v1/traces"
    process = serving("serve", "--port", str(port), "--store", str(path), "--retain", "2m", ready=url)
    try:
        now = time.time_ns()
        old, new = "a" * 32, "b" * 32
        spans = []
        for trace, end in ((old, now - 10 * 60_000 * MS), (new, now)):
            spans += [
                _span(trace, trace[:15] + "1", None, "task", end - 900 * MS, end),
                _span(trace, trace[:15] + "2", trace[:15] + "1", "tool", end - 800 * MS, end - 100 * MS),
            ]
        body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        deadline, traces = time.monotonic() + 30, None
        while time.monotonic() < deadline:
            with SharedStore(path).reading() as store:
                traces = {t for (t,) in store.con.execute("SELECT DISTINCT trace_id FROM spans").fetchall()}
            if traces == {new}:
                break
            time.sleep(0.3)
        assert traces == {new}
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert "1 old traces pruned" in err
