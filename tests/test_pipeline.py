"""Blaming a store in worker processes: the same task results as in one process, whatever the batching."""

from __future__ import annotations

from tracebuild import varied_store

from agentscope.analysis import report
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store, query


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
