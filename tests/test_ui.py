"""``agentscope ui`` in a real headless Chromium (Debian's package): pages, the API, filters, live writes.

Without Chromium or Playwright the browser tests skip, except in CI
(``AGENTSCOPE_REQUIRE_SERVICES=1``), where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pytest
from clirun import cli_json, serving
from tracebuild import _varied_trace, store_row, varied_store
from traces_fixtures import ROOT, agent_trace_otlp

from agentscope.sim.server import free_port
from agentscope.store import Store
from agentscope.store.schema import rows_to_table

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPAIRED_TRACE = f"{0xABC:032x}"
SHOTS = os.environ.get("AGENTSCOPE_UI_SCREENSHOTS")
"""A folder to save each page's screenshot in (docs/ui.md's pictures are made so)."""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """300 varied tasks and one LangGraph-shaped task whose model call the repair moves under its node."""
    path = varied_store(tmp_path_factory.mktemp("ui") / "ui.duckdb", 300)
    t = REPAIRED_TRACE
    base = 1_700_000_000_000 + 400 * 60_000
    rows = [
        store_row(
            t, "a0", None, "task", base, base + 143.5, "LangGraph", **{"agentscope.task.name": "graph"}
        ),
        store_row(t, "a1", "a0", "step", base + 3.5, base + 139.7, "call_model"),
        store_row(t, "a2", "a0", "step", base + 4.0, base + 139.0, "RunnableSequence"),
        store_row(
            t, "a3", "a2", "llm", base + 6.6, base + 137.7, "ChatOpenAI", **{"gen_ai.request.model": "gpt-x"}
        ),
        store_row(
            t, "a4", "a0", "tool", base + 140.0, base + 143.0, "lookup", **{"gen_ai.tool.name": "lookup"}
        ),
    ]
    with Store(path) as opened:
        opened.insert(rows_to_table(rows))
    return path


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def server(store):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = serving("ui", "--store", str(store), "--port", str(port), ready=base + "/api/overview")
    yield base
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "Playwright (pip install -e '.[test]')"
    if missing is None and not Path(CHROMIUM).exists():
        missing = "Chromium (apt-get install chromium)"
    if missing:
        if os.environ.get("AGENTSCOPE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"the UI tests need {missing}")
        pytest.skip(f"the UI tests need {missing}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


class Page:
    """A browser page that records console errors, failed requests and every URL it asked for."""

    def __init__(self, browser, base: str) -> None:
        self.base = base
        self.page = browser.new_page(viewport={"width": 1360, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def open(self, hash_: str) -> None:
        self.page.goto(f"{self.base}/{hash_}")
        self.settle(hash_)

    def settle(self, hash_: str | None = None) -> None:
        expected = hash_ or "#"
        self.page.wait_for_function(
            "([h]) => document.body.dataset.loading === '0'"
            " && (document.body.dataset.rendered || '').startsWith(h)",
            arg=[expected],
            timeout=60_000,
        )

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SHOTS) / f"ui-{name}.png"), full_page=name != "tasks")

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def page(browser, server):
    opened = Page(browser, server)
    yield opened
    opened.close()


def test_the_api_gives_the_cli_documents(server, store):
    assert get(server + "/api/blame")[1] == cli_json("blame", "--store", str(store))
    assert get(server + "/api/blame?task=triage&since=2023-11-14T23:00Z")[1] == cli_json(
        "blame", "--store", str(store), "--task", "triage", "--since", "2023-11-14T23:00Z"
    )
    assert get(f"{server}/api/traces/{REPAIRED_TRACE}")[1] == cli_json(
        "show", REPAIRED_TRACE, "--store", str(store)
    )
    assert get(f"{server}/api/traces/{REPAIRED_TRACE}?repair=0")[1] == cli_json(
        "show", REPAIRED_TRACE, "--store", str(store), "--no-repair"
    )
    status, body = get(server + "/api/blame?since=yesterday")
    assert status == 400 and "--since 'yesterday'" in body["error"]
    assert get(server + "/api/traces/ffff")[0] == 404
    tasks = get(server + "/api/tasks?limit=5&offset=0")[1]
    durations = [t["duration_ms"] for t in tasks["tasks"]]
    assert tasks["count"] == 301 and durations == sorted(durations, reverse=True)
    latency = cli_json("budget", "--store", str(store))["latency"]
    for query in ("", "?task=triage"):
        curve = get(server + "/api/curve" + query)[1]  # from the task table, column by column
        expected = cli_json("budget", "--store", str(store), *(["--task", "triage"] if query else []))[
            "latency"
        ]
        assert curve["curve"] == expected["curve"] and curve["distribution_ms"] == expected["distribution_ms"]
    assert latency["curve"][-1]["inference_speedup"] == "inf"
    overview = get(server + "/api/overview")[1]
    assert overview["task_names"] == get(server + "/api/blame")[1]["tasks"]["names"]
    assert overview["traces"] >= 301 and overview["services"]


def test_every_page_renders_without_errors_and_from_the_app_alone(page):
    for hash_, ready in (("#/", "#verdict"), ("#/tasks", "#tasks-table"), ("#/budget", "#budget-table")):
        page.open(hash_)
        assert page.page.locator(ready).count() == 1, (hash_, page.page.locator("#error").text_content())
        page.shot(hash_.strip("#/") or "overview")
    page.open(f"#/trace/{REPAIRED_TRACE}")
    assert page.page.locator("#waterfall .span-row").count() == 5
    page.shot("trace")
    assert page.errors == []
    assert all(url.startswith(page.base) or url.startswith("data:") for url in page.requests), page.requests


def test_the_waterfall_marks_the_critical_path_of_show(page, store):
    for trace_id in (REPAIRED_TRACE, get(page.base + "/api/tasks?limit=1")[1]["tasks"][0]["trace_id"]):
        page.open(f"#/trace/{trace_id}")
        drawn = page.page.eval_on_selector_all(
            "#waterfall .cp",
            "nodes => nodes.map(n => [n.dataset.spanId, n.dataset.category, n.dataset.component || null,"
            " Number(n.dataset.startMs), Number(n.dataset.endMs)])",
        )
        shown = cli_json("show", trace_id, "--store", str(store))["critical_path"]
        expected = [[p["span_id"], p["category"], p["component"], p["start_ms"], p["end_ms"]] for p in shown]
        assert sorted(drawn) == sorted(expected)
    assert page.errors == []


def test_repairs_are_marked_and_can_be_switched_off(page, store):
    page.open(f"#/trace/{REPAIRED_TRACE}")
    assert page.page.locator(".span-row[data-span-id='a2'] .repaired").count() == 1
    page.page.uncheck("#f-repair")
    page.page.click("#f-apply")
    page.settle("#/tasks")  # a new selection goes back to the task list
    page.open(f"#/trace/{REPAIRED_TRACE}?repair=0")
    assert page.page.locator(".repaired").count() == 0
    drawn = page.page.eval_on_selector_all("#waterfall .cp", "nodes => nodes.map(n => n.dataset.spanId)")
    raw = cli_json("show", REPAIRED_TRACE, "--store", str(store), "--no-repair")["critical_path"]
    assert sorted(drawn) == sorted(p["span_id"] for p in raw) and "a3" not in drawn
    page.page.click(".span-row[data-span-id='a3']")
    assert "gen_ai.request.model" in page.page.inner_text("#attributes")
    assert page.errors == []


def test_a_trace_of_thousands_of_spans_draws_its_critical_path_first_and_all_on_request(browser, tmp_path):
    """A long session: 3,000 spans of parallel lookups off the critical path, one model call on it.  The
    waterfall draws 1,500 rows (30,000 took 8–9 s to draw, 1,500 about 2 s), the critical path's among
    them, says so, and draws every span when asked."""
    t, base, lookups = f"{0xB16:032x}", 1_700_000_000_000, 3000
    rows = [store_row(t, "root", None, "task", base, base + 1000, "session", **{"agentscope.task.name": "s"})]
    rows.append(store_row(t, "batch", "root", "step", base, base + 400, "lookups"))
    rows += [
        store_row(t, f"l{i}", "batch", "tool", base + i / 10, base + i / 10 + 5, "lookup")
        for i in range(lookups)
    ]
    rows.append(
        store_row(t, "llm", "root", "llm", base + 400, base + 1000, "chat", **{"gen_ai.request.model": "x"})
    )
    path = tmp_path / "long.duckdb"
    with Store(path) as opened:
        opened.insert(rows_to_table(rows))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    process = serving("ui", "--store", str(path), "--port", str(port), ready=base_url + "/api/overview")
    opened = Page(browser, base_url)
    try:
        opened.open(f"#/trace/{t}")
        drawn = opened.page.eval_on_selector_all(
            "#waterfall .span-row", "nodes => nodes.map(n => n.dataset.spanId)"
        )
        assert len(drawn) == 1500 and drawn[:2] == ["root", "batch"] and "llm" in drawn
        path_ids = {p["span_id"] for p in cli_json("show", t, "--store", str(path))["critical_path"]}
        assert path_ids <= set(drawn)
        assert "Drawing 1,500 of 3,003 spans" in opened.page.inner_text("#waterfall-cut")
        opened.page.click("#waterfall-cut a")
        opened.settle(f"#/trace/{t}?all_spans=1")
        assert opened.page.locator("#waterfall .span-row").count() == lookups + 3
        assert opened.page.locator("#waterfall-cut").count() == 0
        assert opened.errors == []
    finally:
        opened.close()
        process.terminate()
        process.wait(timeout=30)


def test_filters_change_the_numbers_as_blame_does(page, store):
    page.open("#/")
    everything = page.page.eval_on_selector("#kpis", "n => ({...n.dataset})")
    page.page.select_option("#f-task", "triage")
    page.page.fill("#f-since", "2023-11-15T00:00Z")
    page.page.click("#f-apply")
    page.settle("#/?task=triage")
    picked = page.page.eval_on_selector("#kpis", "n => ({...n.dataset})")
    expected = cli_json("blame", "--store", str(store), "--task", "triage", "--since", "2023-11-15T00:00Z")
    assert int(picked["tasks"]) == expected["tasks"]["count"] < int(everything["tasks"])
    assert float(picked["p95Ms"]) == expected["latency_ms"]["p95"]
    assert page.page.inner_text("#verdict") == expected["verdict"]
    page.page.click("nav a[data-page='tasks']")
    page.settle("#/tasks?task=triage")
    assert int(page.page.get_attribute("#tasks-table", "data-count")) == expected["tasks"]["count"]
    assert page.errors == []


def test_the_ui_reads_while_another_process_writes(server, store, tmp_path):
    """An ingest of 40 new traces runs in another process while the API is asked, again and again."""
    before = get(server + "/api/blame")[1]["tasks"]["count"]
    files = []
    for k in range(40):
        document = agent_trace_otlp(trace=f"{0xF00 + k:032x}")
        for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + k * 10**9)
            span["endTimeUnixNano"] = int(span["endTimeUnixNano"]) + k * 10**9
        files.append(tmp_path / f"t{k}.json")
        files[-1].write_text(json.dumps(document))
    writer = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", "ingest", *map(str, files), "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    statuses = []
    deadline = time.monotonic() + 120
    while writer.poll() is None and time.monotonic() < deadline:
        statuses.append(get(server + "/api/blame")[0])
    assert writer.wait(timeout=120) == 0, writer.communicate()[1]
    statuses.append(get(server + "/api/overview")[0])
    assert set(statuses) == {200}
    after = get(server + "/api/blame")[1]["tasks"]["count"]
    assert after == before + 40
    assert get(f"{server}/api/traces/{0xF00:032x}")[1]["task"]["span_id"] == ROOT


def test_the_budget_page_puts_each_candidates_predicted_latency_beside_its_cost(page, server, store):
    from agentscope.analysis.profiles import load_presets

    presets = list(load_presets())
    targets = [arg for name in presets for arg in ("--target", name)]
    expected = cli_json("budget", "--store", str(store), "--format", "json", *targets)["decision"]
    assert get(server + "/api/budget")[1]["decision"] == expected
    assert [row["option"] for row in expected] == ["as traced", *presets]
    page.open("#/budget")
    cells = page.page.eval_on_selector_all(
        "#decision-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert [row[0] for row in cells] == ["as traced", *presets]
    assert all(row[1] != "—" and row[2] != "—" for row in cells)  # p50 and p95 beside the cost
    assert page.errors == []


def test_an_answer_reads_its_rows_and_their_version_at_once_and_is_current(tmp_path, monkeypatch):
    """After a write, an answer from the task table opens the store once to read (the content it is
    current for, and the rows brought up to date), and once more to keep the new rows when they are
    due; the overview lists the name of a task written since, and blame counts it as a full
    recompute does."""
    import random

    from agentscope.cli.ui import StoreView

    from agentscope import attributes as A
    from agentscope.analysis.pipeline import blame_store
    from agentscope.store.query import PROBE_SERVICE
    from agentscope.store.selection import Selection
    from agentscope.store.shared import SharedStore

    def full() -> dict | None:
        with shared.reading() as snapshot:
            return blame_store(snapshot)

    rnd = random.Random(3)
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table([r for t in range(6) for r in _varied_trace(rnd, 1.7e12 + t * 5_000, 1)]))
    view = StoreView(shared.path)
    first = view.blame(Selection(), True, 95)
    assert first == full()
    opens: list[bool] = []  # of the file: read-only or not
    init = Store.__init__
    monkeypatch.setattr(
        Store,
        "__init__",
        lambda store, *a, **k: (
            (a[0] is not None and opens.append(k.get("read_only", False))) or init(store, *a, **k)
        ),
    )
    assert view.blame(Selection(), True, 95) is first and opens == [True]
    root, *spans = _varied_trace(rnd, 1.7e12 + 6 * 5_000, 1)
    renamed = (*root[:3], "escalate", *root[4:14], json.dumps({A.TASK_NAME: "escalate"}))
    shared.insert(rows_to_table([renamed, *spans]))
    opens.clear()
    blame = view.blame(Selection(), True, 95)
    assert opens == [True]  # the new rows are held back (HeldRows): the file is not written
    assert blame["tasks"]["count"] == first["tasks"]["count"] + 1 and blame == full()
    assert "escalate" in blame["tasks"]["names"]
    view._held.every_s = 0  # due: every row held is written, each trace once
    shared.insert(rows_to_table(_varied_trace(rnd, 1.7e12 + 7 * 5_000, 1)))
    opens.clear()
    blame = view.blame(Selection(), True, 95)
    view._held.wait()  # the write runs on a thread of its own: the request did not wait for it
    assert opens == [True, False] and blame == full()
    con = duckdb.connect(str(shared.path), read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT trace_id) FROM task_traces").fetchone() == (8, 8)
    con.close()
    root, *spans = _varied_trace(rnd, 1.7e12 + 8 * 5_000, 1)
    shared.insert(
        rows_to_table([(*root[:3], "audit", *root[4:14], json.dumps({A.TASK_NAME: "audit"})), *spans])
    )
    probed = _varied_trace(rnd, 1.7e12 + 9 * 5_000, 1)  # a probe's trace: not a service to pick
    shared.insert(rows_to_table([(*row[:10], PROBE_SERVICE, *row[11:]) for row in probed]))
    overview = view.overview()
    assert "audit" in overview["task_names"] and overview["services"] == ["svc"]
    assert overview["spans"] == shared.answer(Store.span_count) - len(probed)
    assert overview["traces"] == 10


def test_the_rows_it_holds_back_are_written_when_the_ui_stops(tmp_path, monkeypatch):
    """The UI holds the rows of the traces it analysed (HeldRows) and writes them as its app shuts down,
    so the next reader of the store analyses none of them again."""
    import random

    from agentscope.cli import ui
    from starlette.testclient import TestClient

    from agentscope.analysis import pipeline
    from agentscope.analysis.pipeline import blame_store
    from agentscope.store.shared import SharedStore

    def kept() -> int:
        with duckdb.connect(str(shared.path), read_only=True) as con:
            return con.execute("SELECT count(*) FROM task_traces").fetchone()[0]

    monkeypatch.setattr(ui, "HeldRows", lambda: pipeline.HeldRows(every_s=3600))
    rnd = random.Random(5)
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table([r for t in range(5) for r in _varied_trace(rnd, 1.7e12 + t * 5_000, 1)]))
    with TestClient(ui.create_app(shared.path)) as client:
        answered = client.get("/api/blame").json()
        assert answered["tasks"]["count"] == 5 and kept() == 0  # held back, not written yet
    assert kept() == 5
    analyse = pipeline.analysed_rows
    analysed: list[int] = []

    def counted(batches, workers):
        batches = list(batches)
        analysed.extend(batch.num_rows for batch in batches)
        return analyse(batches, workers)

    monkeypatch.setattr(pipeline, "analysed_rows", counted)
    assert blame_store(shared) == answered and not analysed
    with shared.reading() as snapshot:
        assert blame_store(snapshot) == answered
