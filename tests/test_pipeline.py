"""Blaming a store in worker processes: the same task results as in one process, whatever the batching."""

from __future__ import annotations

import gc
import tempfile

from tracebuild import span, varied_store

from agentscope.analysis import pipeline, report, rows
from agentscope.analysis.batch import SpanBatch, as_columns
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store, query
from agentscope.store.shared import SharedStore


def test_worker_processes_give_the_results_one_process_gives(tmp_path, monkeypatch):
    path = varied_store(tmp_path / "varied.duckdb", 300)
    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 400)  # several batches, so each worker gets more than one
    variants = report.variants(report.DEFAULT_SCENARIOS)
    with Store(path, read_only=True) as store:
        assert query.buckets_for(store) >= 4
        alone = task_results(store, variants, workers=1)
        pooled = task_results(store, variants, workers=2)

    def by_task(results):
        return sorted(results, key=lambda r: (r.trace_id, r.span_id))

    assert len(alone) == 300
    assert all(r.whatif_ns and r.operations and r.models for r in alone)
    assert by_task(pooled) == by_task(alone)


def test_rows_kept_by_worker_processes_are_the_rows_one_process_keeps(tmp_path, monkeypatch):
    """Rows built in the workers, each batch handed over as a file, equal those built in one process,
    and are kept; the files are gone afterwards."""
    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 400)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    every = list(range(len(pipeline.ROW_VARIANTS)))
    order = [("trace_id", "ascending"), ("span_id", "ascending")]
    tables = []
    for workers in (1, 2):
        shared = SharedStore(varied_store(tmp_path / f"{workers}.duckdb", 300))
        tables.append(pipeline.kept_table(shared, every, workers).sort_by(order))
        with Store(shared.path, read_only=True) as store:
            assert store.scalar("SELECT count(*) FROM tasks") == 300
    assert tables[0].num_rows == 300 and tables[0].equals(tables[1])
    assert not any(scratch.iterdir())


def test_batches_reach_the_workers_without_a_usable_temporary_folder(tmp_path, monkeypatch):
    """With no temporary folder to be had, or one that cannot take a batch (a full disk), batches are
    pickled to the workers instead, and the answer is the same."""
    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 400)
    path = varied_store(tmp_path / "varied.duckdb", 120)
    variants = report.variants(report.DEFAULT_SCENARIOS)
    with Store(path, read_only=True) as store:
        expected = task_results(store, variants, workers=1)

        def full_disk(batch, path):
            with open(path, "wb") as partial:
                partial.write(b"ARROW1")
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(pipeline, "write_file", full_disk)
        assert task_results(store, variants, workers=2) == expected
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
        assert task_results(store, variants, workers=2) == expected


def test_a_batch_is_read_analysed_and_made_rows_with_the_collector_paused(monkeypatch):
    """A worker's batch, from its columns to its rows, is one pause of the garbage collector: a pause
    that ended with the results still alive had the collector walk all of them."""
    enabled_in: dict[str, bool] = {}

    def spied(module, name):
        real = getattr(module, name)

        def spy(*args, **kwargs):
            enabled_in[name] = gc.isenabled()
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)

    spied(SpanBatch, "from_any")
    spied(rows, "results_table")
    spans = as_columns([span("R", None, "task", 0, 100), span("L", "R", "llm", 10, 90, label="gpt-x")])
    assert gc.isenabled()
    table = rows.analyze_rows(spans, pipeline.ROW_VARIANTS)
    assert table.num_rows == 1 and enabled_in == {"from_any": False, "results_table": False}
    assert gc.isenabled()
