"""The task table (DESIGN §15): an answer from kept rows and the traces written since equals a full
recompute of the same store, field for field, however the spans arrived."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import multiprocessing
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import store_workers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracebuild import _varied_trace

from agentscope.analysis import pipeline
from agentscope.analysis.pipeline import blame_store, task_results
from agentscope.analysis.report import DEFAULT_SCENARIOS, variants
from agentscope.analysis.whatif import Scenario, inference_factor, on_lines
from agentscope.store.schema import (
    COLUMNS,
    INSERT_TASK_ROWS,
    LINE_TOLERANCE,
    SCHEMA_VERSION,
    TASK_ARROW_SCHEMA,
    TASK_ROWS,
    TASKS_DDL,
    TYPED_NAMES,
    WHATIF_COLUMNS,
    WHATIF_FACTORS,
    rows_to_table,
    whatif_list,
)
from agentscope.store.selection import Selection
from agentscope.store.shared import SharedStore
from agentscope.store.store import Store

SERVICES = ("checkout", "support", "search")
SPAWN = multiprocessing.get_context("spawn")


def _rows(traces: int, seed: int) -> list[tuple]:
    """Span rows of ``traces`` varied agent traces, each trace's spans under one of three services."""
    rnd = random.Random(seed)
    rows = []
    for t in range(traces):
        service = SERVICES[t % len(SERVICES)]
        rows += [
            (*row[:10], service, *row[11:]) for row in _varied_trace(rnd, 1_700_000_000_000.0 + t * 5_000, 1)
        ]
    return rows


def _full(shared: SharedStore, selection: Selection | None) -> dict | None:
    """The answer of a full recompute: every span of a snapshot analysed."""
    with shared.reading() as snapshot:
        return blame_store(snapshot, selection=selection)


def _kept(path) -> tuple[int, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(
            "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM task_traces)"
        ).fetchone()
    finally:
        con.close()


SELECTIONS = st.sampled_from(
    [
        None,
        Selection(task="resolve_ticket"),
        Selection(service="support"),
        Selection(since_ns=1_700_000_010_000 * 1_000_000),
        Selection(task="triage", until_ns=1_700_000_020_000 * 1_000_000),
    ]
)


@st.composite
def histories(draw):
    """Spans of a few traces, written in random batches (a trace's spans often split across them, so a
    trace is analysed while incomplete and again later), some batches repeating spans already written,
    with a read after some of the writes."""
    rows = _rows(draw(st.integers(2, 7)), draw(st.integers(0, 2**16)))
    order = draw(st.permutations(range(len(rows))))
    cuts = sorted(draw(st.lists(st.integers(1, len(rows) - 1), max_size=5, unique=True)))
    bounds = [0, *cuts, len(rows)]
    batches = []
    for a, b in itertools.pairwise(bounds):
        batch = [rows[i] for i in order[a:b]]
        if a and draw(st.booleans()):  # the same spans again, as a retried export sends them
            batch += [rows[i] for i in order[: draw(st.integers(1, a))]]
        batches.append(batch)
    reads = draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    return batches, reads, draw(SELECTIONS)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_kept_answers_equal_a_full_recompute_however_the_spans_arrive(history, tmp_path_factory):
    batches, reads, selection = history
    shared = SharedStore(tmp_path_factory.mktemp("kept") / "store.duckdb")
    for batch, read in zip(batches, reads):
        shared.insert(rows_to_table(batch))
        if read:
            assert blame_store(shared, selection=selection) == _full(shared, selection)
    assert blame_store(shared, selection=selection) == _full(shared, selection)
    assert blame_store(shared) == _full(shared, None)  # every row written is still right


def test_a_change_too_large_to_read_under_the_lock_is_read_from_a_snapshot(tmp_path, monkeypatch):
    """Past ``LIVE_READ_MAX_SPANS`` changed spans, the spans and their traces' services are read from a
    snapshot (the services beside the walk, in a thread); the rows kept and every selection's answer
    are a full recompute's."""
    monkeypatch.setattr(pipeline, "LIVE_READ_MAX_SPANS", 0)
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table(_rows(9, 3)))
    for selection in (Selection(service="support"), None, Selection(service="checkout", task="triage")):
        assert blame_store(shared, selection=selection) == _full(shared, selection)
    with Store(shared.path, read_only=True) as store:
        kept = dict(store.con.execute("SELECT DISTINCT trace_id, services FROM tasks").fetchall())
        named = dict(store.con.execute("SELECT DISTINCT trace_id, [service] FROM spans").fetchall())
    assert kept == named and len(kept) == 9


def _spans_analysed(monkeypatch) -> list[int]:
    """A list that each analysis of changed traces (``pipeline.analysed_rows``) appends its spans to."""
    analysed: list[int] = []
    real = pipeline.analysed_rows

    def counting(batches, *args):
        batches = list(batches)
        analysed.append(sum(len(b) for b in batches))
        return real(batches, *args)

    monkeypatch.setattr(pipeline, "analysed_rows", counting)
    return analysed


def test_a_second_read_analyses_nothing_and_a_late_span_only_its_trace(tmp_path, monkeypatch):
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(6, 1)
    late = next(r for r in rows if r[0] == rows[-1][0] and r[4] == "task")
    rows.remove(late)  # the last trace's task span arrives after the first read: its children wait as orphans
    shared.insert(rows_to_table(rows))
    analysed = _spans_analysed(monkeypatch)
    first = blame_store(shared)
    assert analysed == [len(rows)] and _kept(shared.path) == (first["tasks"]["count"], 6)
    assert blame_store(shared) == first and analysed[-1] == 0
    shared.insert(rows_to_table([late]))
    after = blame_store(shared)
    late_trace = sum(1 for row in [*rows, late] if row[0] == late[0])
    assert analysed[-1] == late_trace
    monkeypatch.undo()
    assert after == _full(shared, None) and after != first


def test_a_report_reads_the_operations_of_its_window_only_and_all_of_them_when_more_tasks_came(
    tmp_path, monkeypatch
):
    """Blame reads the columns a report aggregates, and the operations of the tasks that can be in its
    window only; should the analysis of the traces written since add more tasks than the read allowed
    for, the rows are read again whole, and the answer is the same."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(40, 5)
    late = [r for r in rows if r[0] == rows[-1][0]]
    shared.insert(rows_to_table([r for r in rows if r[0] != late[0][0]]))
    first = blame_store(shared)
    picks = pipeline.row_picks(variants(DEFAULT_SCENARIOS), True, ())
    table = pipeline.kept_table(shared, picks, columns=pipeline.report.REPORT_COLUMNS, window_at=95)
    assert table.column_names == list(pipeline.report.REPORT_COLUMNS)
    assert 0 < table.column("operations").null_count < table.num_rows
    assert pipeline.report.Population.of_table(table, 95) == pipeline.report.Population.of_table(
        pipeline.kept_table(shared, picks), 95
    )
    shared.insert(rows_to_table(late))
    monkeypatch.setattr(pipeline.report, "window_durations", lambda durations, percentile, added: (-2, -1))
    again = blame_store(shared)
    assert again == _full(shared, None) and again != first


def test_options_the_rows_cannot_answer_are_analysed_on_demand(tmp_path):
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table(_rows(5, 2)))
    blame_store(shared)  # rows kept
    tool = (Scenario("tool x2", {"tool": 2.0}),)
    for options in ({"scenarios": tool}, {"repair": False}, {"percentile": 90}):
        with shared.reading() as snapshot:
            assert blame_store(shared, **options) == blame_store(snapshot, **options)
    budget_variants = variants(pipeline.report.ROW_SCENARIOS[3:5])  # two points of the budget's curve
    with shared.reading() as snapshot:
        full = task_results(snapshot, budget_variants)
    assert [r.whatif_ns for r in task_results(shared, budget_variants)] == [r.whatif_ns for r in full]


def test_rows_of_another_analysis_version_are_analysed_again(tmp_path, monkeypatch):
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table(_rows(3, 3)))
    first = blame_store(shared)
    monkeypatch.setattr(pipeline, "ROW_VERSION", "next")
    assert blame_store(shared) == first
    con = duckdb.connect(str(shared.path), read_only=True)
    assert con.execute("SELECT DISTINCT version FROM task_traces").fetchall() == [("next",)]
    con.close()


def test_a_reader_that_cannot_write_its_rows_back_still_answers_and_the_next_keeps_them(
    tmp_path, monkeypatch
):
    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table(_rows(4, 4)))
    monkeypatch.setattr(pipeline, "ROW_WRITE_WAIT_S", 0.05)
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with SharedStore(shared.path).writing():
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    holding.wait(10)
    try:
        busy = blame_store(shared)  # the file is held: the reader waits its 2 s, then reads a snapshot
    finally:
        release.set()
        thread.join()
    assert _kept(shared.path) == (0, 0)
    assert busy == _full(shared, None)
    assert blame_store(shared) == busy and _kept(shared.path)[1] == 4


V1_DDL = (
    "CREATE TABLE agentscope_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE TABLE spans ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type, _ in COLUMNS)
    + ", PRIMARY KEY (trace_id, span_id))",
    "INSERT INTO agentscope_meta VALUES ('schema_version', '1')",
)
"""A store as the release before the task table wrote it: its spans and meta, version 1."""


def test_a_version_1_store_is_migrated_in_place_on_first_open(tmp_path):
    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    for statement in V1_DDL:
        con.execute(statement)
    con.register("rows", rows_to_table(_rows(5, 5)))
    con.execute("INSERT INTO spans SELECT * FROM rows")
    con.close()
    with Store(path, read_only=True) as old:  # read-only, it is read as it is
        assert old.version == 1
        expected = blame_store(old)
    shared = SharedStore(path)
    assert blame_store(shared) == expected
    with Store(path, read_only=True) as migrated:
        assert migrated.version == SCHEMA_VERSION
        assert migrated.scalar("SELECT count(*) FROM trace_writes") == migrated.trace_count() == 5
    assert _kept(path)[1] == 5
    shared.insert(rows_to_table(_rows(7, 5)[-3:]))  # spans of a new trace after the migration
    assert blame_store(shared) == _full(shared, None)


STORE_V2 = Path(__file__).parent / "data" / "store-v2.duckdb.gz"
"""A store as the release before the typed columns wrote it (schema version 2): ``agentscope demo --tasks 4``
(238 spans of 12 tasks through the real openai SDK, tools, a database and HTTP), then blamed, so its
task table is filled."""


def test_a_version_2_store_written_by_the_previous_release_is_migrated_in_place(tmp_path):
    path = tmp_path / "v2.duckdb"
    path.write_bytes(gzip.decompress(STORE_V2.read_bytes()))
    order = "SELECT span_id FROM spans ORDER BY rowid"
    with Store(path, read_only=True) as old:  # read-only, the typed columns are derived as it is read
        assert old.version == 2
        expected = blame_store(old)
        stored_order = old.con.execute(order).fetchall()
        derived = old.con.execute(f"SELECT {', '.join(TYPED_NAMES)} FROM agentscope_spans ORDER BY span_id")
        derived = derived.fetchall()
    kept_before = _kept(path)
    assert kept_before[0] == 12
    shared = SharedStore(path)
    assert blame_store(shared) == expected
    with Store(path, read_only=True) as migrated:
        assert migrated.version == SCHEMA_VERSION
        assert migrated.con.execute(order).fetchall() == stored_order  # rows in the order stored
        typed = f"SELECT {', '.join(TYPED_NAMES)} FROM spans ORDER BY span_id"
        assert migrated.con.execute(typed).fetchall() == derived
        assert {
            label
            for (label,) in migrated.con.execute("SELECT label FROM spans WHERE kind = 'llm'").fetchall()
        }
        assert migrated.scalar("SELECT count(*) FROM spans WHERE input_tokens > 0") > 0
        earliest = "SELECT trace_id, min(start_ns) AS first_ns FROM spans GROUP BY trace_id"
        same = f"SELECT count(*) FROM trace_writes JOIN ({earliest}) USING (trace_id, first_ns)"
        assert migrated.scalar(same) == migrated.trace_count() >= 12
    assert _kept(path) == kept_before  # the task rows stay: their analysis has not changed
    with Store(path) as store:
        again = store.con.sql("SELECT * EXCLUDE (" + ", ".join(TYPED_NAMES) + ") FROM spans").to_arrow_table()
        assert store.insert(again.slice(0, 5)).added == 0  # the key still holds
    shared.insert(rows_to_table(_rows(2, 9)))  # new traces after the migration
    assert blame_store(shared) == _full(shared, None)


KEPT_WHATIFS = f"SELECT count({') + count('.join(WHATIF_COLUMNS)}) FROM tasks"
"""The what-ifs the task table keeps (not null: off their lines, or a line's limit)."""
STORES_BEFORE = {
    3: Path(__file__).parent / "data" / "store-v3.duckdb.gz",
    4: Path(__file__).parent / "data" / "store-v4.duckdb.gz",
}
"""Stores as the releases before the what-if columns (schema version 3: each row's what-ifs a list) and
before the what-ifs' lines (4: every what-if in its column) wrote them: ``agentscope demo --tasks 4``
(226 and 257 spans of 12 tasks), then blamed, so their task tables are filled."""


@pytest.mark.parametrize("version", sorted(STORES_BEFORE))
def test_an_older_stores_task_rows_stay_with_their_what_ifs_on_their_lines(tmp_path, monkeypatch, version):
    """The rows move to the what-if columns, each what-if null on its line: the first answer after the
    migration analyses no trace, and the rows read back are the rows as they were, each what-if there or
    on its line within ``LINE_TOLERANCE``: the rows the current analysis makes of the same spans."""
    path = tmp_path / f"v{version}.duckdb"
    path.write_bytes(gzip.decompress(STORES_BEFORE[version].read_bytes()))
    order = "ORDER BY trace_id, span_id"
    con = duckdb.connect(str(path), read_only=True)
    before = con.sql(f"SELECT {'*' if version == 3 else TASK_ROWS} FROM tasks {order}").to_arrow_table()
    (written,) = con.execute("SELECT DISTINCT version FROM task_traces").fetchall()
    con.close()
    assert before.num_rows == 12 and len(before.column("whatif_ns")[0]) == len(WHATIF_COLUMNS)
    with Store(path, read_only=True) as old:
        assert old.version == version
    fresh = tmp_path / "fresh.duckdb"
    shutil.copy(path, fresh)
    # The rows' analysis version is older than this release's, which would analyse every trace again;
    # the demo's spans are analysed alike by both, so the rows are taken as this release's own.
    monkeypatch.setattr(pipeline, "ROW_VERSION", written[0])
    analysed = _spans_analysed(monkeypatch)
    shared = SharedStore(path)
    assert blame_store(shared) == _full(shared, None) and sum(analysed) == 0
    with Store(path, read_only=True) as migrated:
        assert migrated.version == SCHEMA_VERSION
        assert "whatif_ns" not in {
            c
            for (c,) in migrated.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'tasks'"
            ).fetchall()
        }
        after = migrated.con.sql(f"SELECT {TASK_ROWS} FROM tasks {order}").to_arrow_table()
        kept = migrated.scalar(KEPT_WHATIFS)
    assert kept <= 2 * after.num_rows  # the demo's tasks keep their inference limits, the rest on lines
    for old, new in zip(before.to_pylist(), after.to_pylist(), strict=True):
        was, now = old.pop("whatif_ns"), new.pop("whatif_ns")
        assert old == new
        assert all(abs(a - b) <= LINE_TOLERANCE * new["duration_ns"] for a, b in zip(was, now, strict=True))
    with Store(fresh) as store:  # the rows analysed again by this release
        store.con.execute("DELETE FROM tasks; DELETE FROM task_traces")
    blame_store(SharedStore(fresh))
    with Store(fresh, read_only=True) as again:
        redone = again.con.sql(f"SELECT {TASK_ROWS} FROM tasks {order}").to_arrow_table()
    # Since analysis 3 a DB span that is the only child of one of its kind is not counted again (the
    # demo's @ags.db around its sqlite3 query was two calls): the rows differ in those counts only.
    assert redone.drop_columns(["operations"]) == after.drop_columns(["operations"])
    for was, now in zip(after.column("operations").to_pylist(), redone.column("operations").to_pylist()):
        was, now = json.loads(was), json.loads(now)
        assert {label: op[:2] for label, op in was.items()} == {label: op[:2] for label, op in now.items()}
        assert all(now[label][2] <= was[label][2] for label in was)


def test_each_kept_what_if_has_its_column_and_line():
    """Every variant a row keeps has its column, and the store knows its inference speedup (its line)."""
    assert [inference_factor(v) for v in pipeline.ROW_VARIANTS] == list(WHATIF_FACTORS)


def _moved(value: float, ulps: int | None) -> float:
    """``value`` a few ulps away, or well off (None)."""
    return value * 0.9 if ulps is None else value + ulps * np.spacing(value)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1_000, 10**13),  # the task's duration, ns
            st.floats(0, 1),  # where its inference limit lies in it
            st.floats(0, 1),  # where the pessimistic limit lies above that
            st.lists(st.integers(-3, 3) | st.sampled_from([None]), min_size=38, max_size=38),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_what_ifs_read_back_from_the_store_as_the_analysis_put_them(tasks):
    """Each what-if is its line give or take a few ulps (a simulation's last bits) or off it (None): the
    analysis puts the near ones on their lines, the store keeps those as null, and reading gives back
    every value the analysis made, bit for bit."""
    durations = np.array([d for d, *_ in tasks], dtype=np.int64)
    made = np.empty((len(tasks), len(WHATIF_FACTORS)))
    at_limit = {pessimistic: WHATIF_FACTORS.index((math.inf, pessimistic)) for pessimistic in (False, True)}
    for row, (d, at, above, ulps) in enumerate(tasks):
        limits = {
            False: _moved(d * at, ulps[at_limit[False]]),
            True: _moved(d * at + (d - d * at) * above, ulps[at_limit[True]]),
        }
        for k, (factor, pessimistic) in enumerate(WHATIF_FACTORS):
            if k in at_limit.values():  # the limits themselves
                made[row, k] = limits[pessimistic]
            elif factor == math.inf:
                made[row, k] = _moved(limits[pessimistic], ulps[k])
            else:
                made[row, k] = _moved(limits[pessimistic] + (d - limits[pessimistic]) / factor, ulps[k])
    on_lines(made, durations, pipeline.ROW_VARIANTS)
    rows = pa.table({field.name: pa.nulls(len(tasks), field.type) for field in TASK_ARROW_SCHEMA})
    for name, values in (("start_ns", np.arange(len(tasks))), ("duration_ns", durations)):
        rows = rows.set_column(rows.schema.get_field_index(name), name, pa.array(values))
    rows = rows.set_column(rows.schema.get_field_index("whatif_ns"), "whatif_ns", pa.array(made.tolist()))
    con = duckdb.connect()
    con.execute(TASKS_DDL.replace(" NOT NULL", ""))
    con.register("agentscope_rows", rows)
    con.execute(f"{INSERT_TASK_ROWS} FROM agentscope_rows")
    read = con.sql(f"SELECT {whatif_list()} FROM tasks ORDER BY start_ns").fetchall()
    assert np.array([r for (r,) in read]).tobytes() == made.tobytes()
    kept = con.execute(KEPT_WHATIFS).fetchone()[0]
    assert kept <= 2 * len(tasks) + sum(off is None for *_, ulps in tasks for off in ulps)  # limits, off ones


def test_saved_task_tables_answer_only_what_their_what_ifs_hold(tmp_path):
    """A per-task table saved with fewer what-if times than blame's scenarios need says so; the store's
    own, exported, answers as the store does."""
    import pyarrow.parquet as pq

    from agentscope.store.export import export_tasks

    shared = SharedStore(tmp_path / "store.duckdb")
    shared.insert(rows_to_table(_rows(12, 8)))
    expected = blame_store(shared)
    with Store(shared.path) as store:
        export_tasks(store, tmp_path / "kept")
    assert pipeline.blame_saved([tmp_path / "kept"]) == expected
    table = pq.read_table(tmp_path / "kept" / "tasks.parquet")
    short = pa.array([w[:4] for w in table.column("whatif_ns").to_pylist()], pa.list_(pa.float64()))
    pq.write_table(
        table.set_column(table.schema.get_field_index("whatif_ns"), "whatif_ns", short),
        tmp_path / "short.parquet",
    )
    with pytest.raises(pipeline.TaskTableError, match="do not hold these what-if scenarios"):
        pipeline.blame_saved([tmp_path / "short.parquet"])


def test_answers_stay_right_while_two_processes_write(tmp_path):
    path = tmp_path / "live.duckdb"
    progress = [tmp_path / f"progress-{n}" for n in range(2)]
    workers = store_workers.start_writers(path, progress, 15_000, 500)
    shared, counts = SharedStore(path), []
    try:
        while any(worker.is_alive() for worker in workers) and len(counts) < 40:
            flushed = store_workers.flushed(progress)
            report = blame_store(shared)
            counts.append(report["tasks"]["count"] if report else 0)
            assert counts[-1] >= flushed  # every task flushed before the read started
    finally:
        for worker in workers:
            worker.join(timeout=300)
    assert all(worker.exitcode == 0 for worker in workers)
    assert counts == sorted(counts) and len(counts) >= 2
    final = blame_store(shared)
    assert final["tasks"]["count"] == 30_000
    assert final == _full(shared, None)


def test_the_cli_answers_from_the_table(tmp_path):
    from clirun import cli_json

    path = tmp_path / "store.duckdb"
    SharedStore(path).insert(rows_to_table(_rows(4, 6)))
    expected = _full(SharedStore(path), None)
    assert cli_json("blame", "--store", str(path)) == expected  # analyses every trace, keeps the rows
    assert _kept(path)[1] == 4
    assert cli_json("blame", "--store", str(path)) == expected  # from the rows


def test_spans_written_outside_agentscopes_writers_are_analysed_too(tmp_path):
    """A DuckDB shell's INSERT marks no trace; the count of spans gives it away, and every trace is
    analysed again once."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(6, 8)
    extra = [r for r in rows if r[0] == rows[-1][0]]  # the last trace, written by hand
    shared.insert(rows_to_table([r for r in rows if r not in extra]))
    before = blame_store(shared)
    con = duckdb.connect(str(shared.path))
    con.register("extra", rows_to_table(extra))
    con.execute("INSERT INTO spans BY NAME SELECT * FROM extra")  # without the typed columns
    con.close()
    after = blame_store(shared)
    assert after == _full(shared, None) and after["tasks"]["count"] == before["tasks"]["count"] + 1
    assert _kept(shared.path)[1] == 6
    with Store(shared.path, read_only=True) as store:  # the hand-written spans got their typed columns
        assert store.scalar("SELECT count(*) FROM spans WHERE label IS NULL") == 0
        assert store.scalar(
            "SELECT count(*) FROM spans WHERE input_tokens > 0 AND trace_id = ?", [extra[0][0]]
        )
    con = duckdb.connect(str(shared.path))
    con.execute("DELETE FROM spans WHERE trace_id = ?", [rows[0][0]])  # a trace deleted by hand
    con.close()
    gone = blame_store(shared)
    assert gone == _full(shared, None) and gone["tasks"]["count"] == after["tasks"]["count"] - 1
    assert _kept(shared.path)[1] == 5


def test_an_answer_from_kept_rows_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas (a fifth of a second) at its first conversion to or from NumPy or a Python
    list; a blame that reads only kept rows converts through buffers and never pays it."""
    path = tmp_path / "store.duckdb"
    SharedStore(path).insert(rows_to_table(_rows(5, 9)))
    expected = blame_store(SharedStore(path))  # every trace analysed, its rows kept
    code = (
        "import json, sys\n"
        "from agentscope.analysis.pipeline import blame_store\n"
        "from agentscope.store.shared import SharedStore\n"
        "print(json.dumps([blame_store(SharedStore(sys.argv[1])), 'pandas' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    answer, pandas = json.loads(done.stdout)
    assert answer == json.loads(json.dumps(expected)) and pandas is False


OTHER_READS = st.lists(st.booleans(), min_size=6, max_size=6)
PRUNE_BEFORE_NS = (1_700_000_000_000 + 10_000) * 1_000_000
"""After the first traces of :func:`_rows` have ended (they start 5 s apart)."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories(), prune_at=st.integers(0, 6), others=OTHER_READS)
def test_rows_brought_up_to_date_equal_a_full_recompute(history, prune_at, others, tmp_path_factory):
    """A reader that keeps its rows and brings them up to date at each read (the UI) answers as a full
    recompute does, while other readers keep rows meanwhile and old traces are pruned."""
    batches, reads, selection = history
    shared = SharedStore(tmp_path_factory.mktemp("since") / "store.duckdb")
    every = range(len(pipeline.ROW_VARIANTS))
    picks = pipeline.row_picks(variants(DEFAULT_SCENARIOS), True, ())
    rows = None
    for i, (batch, read) in enumerate(zip(batches, reads)):
        shared.insert(rows_to_table(batch))
        if i == prune_at:  # the first two traces' spans have all ended by then
            shared.prune(PRUNE_BEFORE_NS)
        if others[i % len(others)]:
            blame_store(shared)  # another reader keeps the rows of what was written
        if read or i == len(batches) - 1:
            rows = pipeline.kept_rows(shared, every, selection=selection, previous=rows)
            assert pipeline.blame_table(rows.table, picks=picks) == _full(shared, selection)


def test_a_reader_holding_rows_analyses_only_what_was_written_after_them(tmp_path, monkeypatch):
    """A reader that brings its rows up to date analyses only the traces written after its last read,
    even where its rows could not be written back then (the store busy): the store's own rows of the
    earlier traces are missing, and the reader's answer is still a full recompute's."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(9, 4)
    traces = sorted({r[0] for r in rows})
    early = [r for r in rows if r[0] in traces[:6]]
    shared.insert(rows_to_table(early))
    every = range(len(pipeline.ROW_VARIANTS))
    with monkeypatch.context() as busy:
        busy.setattr(pipeline, "_write_back", lambda *args: None)
        kept = pipeline.kept_rows(shared, every)
    first = kept.table.num_rows
    assert first and _kept(shared.path) == (0, 0)
    analysed: list[int] = []
    analysed_rows = pipeline.analysed_rows
    monkeypatch.setattr(
        pipeline, "analysed_rows", lambda *args: analysed.append(len(fresh := analysed_rows(*args))) or fresh
    )
    shared.insert(rows_to_table([r for r in rows if r not in early]))
    kept = pipeline.kept_rows(shared, every, previous=kept)
    picks = pipeline.row_picks(variants(DEFAULT_SCENARIOS), True, ())
    assert pipeline.blame_table(kept.table, picks=picks) == _full(shared, None)
    assert analysed == [kept.table.num_rows - first] and _kept(shared.path)[1] == 3


def test_rows_held_back_are_written_when_due_each_trace_as_last_analysed(tmp_path):
    """A reader that holds new rows back (HeldRows, the UI) writes them all in one write when due: a
    trace analysed twice meanwhile (its late spans arrived) keeps its newest analysis, once, and the
    store's table then answers as a full recompute."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(7, 8)
    traces = sorted({r[0] for r in rows})
    late = [r for r in rows if r[0] == traces[0] and r[2] is not None][-2:]  # two child spans, late
    every = range(len(pipeline.ROW_VARIANTS))
    held = pipeline.HeldRows(every_s=3600)
    shared.insert(rows_to_table([r for r in rows if r[0] in traces[:4] and r not in late]))
    kept = pipeline.kept_rows(shared, every, held=held)
    shared.insert(rows_to_table(late + [r for r in rows if r[0] in traces[4:6]]))
    kept = pipeline.kept_rows(shared, every, previous=kept, held=held)
    assert _kept(shared.path) == (0, 0)
    held.every_s = 0
    shared.insert(rows_to_table([r for r in rows if r[0] == traces[6]]))
    kept = pipeline.kept_rows(shared, every, previous=kept, held=held)
    held.wait()  # the due write runs on a thread of its own
    assert _kept(shared.path) == (kept.table.num_rows, 7)
    with Store(shared.path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM task_traces JOIN trace_writes USING (trace_id, seq)") == 7
    assert blame_store(shared) == _full(shared, None)


def test_a_due_write_of_held_rows_does_not_hold_up_the_read_that_made_it_due(tmp_path, monkeypatch):
    """The write of held rows waits for the store's lock behind the app's writes; the reader (a UI
    request) returns its rows meanwhile, and the rows land when the write can be made."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(4, 10)
    shared.insert(rows_to_table(rows))
    go, write_back = threading.Event(), pipeline._write_back

    def slow_write(*args):
        assert go.wait(30)
        write_back(*args)

    monkeypatch.setattr(pipeline, "_write_back", slow_write)
    held = pipeline.HeldRows(every_s=0)
    kept = pipeline.kept_rows(shared, range(len(pipeline.ROW_VARIANTS)), held=held)
    assert kept.table.num_rows and _kept(shared.path) == (0, 0)  # answered; the write still waits
    go.set()
    held.wait()
    assert _kept(shared.path) == (kept.table.num_rows, 4)


def test_rows_held_back_of_traces_pruned_meanwhile_are_not_written(tmp_path):
    """Rows held back (or written back late) of traces pruned after they were read are left out: the
    task table keeps no row of a trace the store no longer holds."""
    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(6, 9)
    traces = sorted({r[0] for r in rows}, key=lambda t: min(r[6] for r in rows if r[0] == t))
    held = pipeline.HeldRows(every_s=3600)
    shared.insert(rows_to_table(rows))
    kept = pipeline.kept_rows(shared, range(len(pipeline.ROW_VARIANTS)), held=held)
    assert shared.prune(PRUNE_BEFORE_NS)[0] == 2  # the two earliest traces
    held.every_s = 0
    late = [r for r in rows if r[0] == traces[-1]][-1:]
    shared.insert(rows_to_table([(*late[0][:1], "f" * 16, *late[0][2:])]))  # a span more, a write due
    pipeline.kept_rows(shared, range(len(pipeline.ROW_VARIANTS)), previous=kept, held=held)
    held.wait()
    with Store(shared.path, read_only=True) as store:
        assert (
            store.scalar(
                "SELECT count(*) FROM task_traces WHERE trace_id NOT IN (SELECT trace_id FROM spans)"
            )
            == 0
        )
        assert store.scalar("SELECT count(DISTINCT trace_id) FROM tasks") == 4
    assert blame_store(shared) == _full(shared, None)


def test_rows_another_reader_kept_replace_a_holders_rows_even_when_no_longer_selected(tmp_path):
    """A reader holding rows of a selection drops a trace's old row when another reader keeps the
    trace's new rows, also when the new rows fall outside the selection: here an orphan tool span was
    the trace's task (inside the window) until its task span arrived (before the window)."""
    from tracebuild import store_row

    from agentscope import attributes as A

    shared = SharedStore(tmp_path / "store.duckdb")
    base = 1_700_000_000_000.0
    trace, task = f"{0xA1:032x}", f"{0xB1:016x}"
    tool = store_row(trace, f"{0xC1:016x}", task, "tool", base + 10_500, base + 10_600, "read")
    root = store_row(
        trace, task, None, "task", base + 5_000, base + 11_000, "triage", **{A.TASK_NAME: "triage"}
    )
    window = Selection(since_ns=int((base + 10_000) * 1_000_000))
    every = range(len(pipeline.ROW_VARIANTS))
    picks = pipeline.row_picks(variants(DEFAULT_SCENARIOS), True, ())
    shared.insert(rows_to_table([tool]))
    kept = pipeline.kept_rows(shared, every, selection=window)
    assert kept.table.num_rows == 1
    shared.insert(rows_to_table([root]))
    blame_store(shared)  # another reader keeps the trace's new row
    kept = pipeline.kept_rows(shared, every, selection=window, previous=kept)
    assert _full(shared, window) is None and pipeline.blame_table(kept.table, picks=picks) is None


def test_no_changed_trace_is_told_from_the_marks_and_any_changed_one_by_the_join(tmp_path):
    """When no trace changed, the marks' counts and sums say so without the join; a trace written
    late, one analysed by another version, and marks that break the rule (a row kept for a trace no
    longer written, in place of one never analysed, with the same sequence number) are each found."""
    from agentscope.store import tasks

    def changed(since: int | None = None) -> list[str]:
        with Store(shared.path, read_only=True) as store:
            found = sorted(
                tasks.changed_traces(store, pipeline.ROW_VERSION, since).column("trace_id").to_pylist()
            )
            joined = store.con.execute(tasks._CHANGED, [-1 if since is None else since, pipeline.ROW_VERSION])
            assert found == sorted(row[0] for row in joined.fetchall())
            return found

    def edit(sql: str, *params) -> None:
        with Store(shared.path) as store:
            store.con.execute(sql, list(params))

    shared = SharedStore(tmp_path / "store.duckdb")
    rows = _rows(5, 21)
    traces = sorted({r[0] for r in rows})
    late = [r for r in rows if r[0] == traces[0] and r[2] is not None][-1:]
    shared.insert(rows_to_table([r for r in rows if r not in late]))
    assert changed() == traces
    blame_store(shared)
    assert changed() == [] and changed(since=0) == []
    shared.insert(rows_to_table(late))
    assert changed() == [traces[0]]
    with Store(shared.path, read_only=True) as store:
        after = store.write_seq() - 1
    assert changed(since=after) == [traces[0]] and changed(since=after + 1) == []
    blame_store(shared)
    edit("UPDATE task_traces SET version = 'older' WHERE trace_id = ?", traces[1])
    assert changed() == [traces[1]]
    blame_store(shared)
    edit("UPDATE task_traces SET trace_id = ? WHERE trace_id = ?", "f" * 32, traces[2])
    assert changed() == [traces[2]]
