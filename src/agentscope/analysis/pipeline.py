"""Blame a whole store: read it in batches of traces, analyse each, aggregate once.

The only place the analysis stage touches I/O; everything it calls is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentscope.analysis import report
from agentscope.analysis.batch import SpanBatch
from agentscope.analysis.tasks import TaskResult, TraceExplanation, analyze, explain
from agentscope.analysis.trace import Trace
from agentscope.analysis.whatif import Scenario
from agentscope.store.query import span_batches, trace_spans
from agentscope.store.store import Store


def task_results(
    store: Store,
    variants: Sequence[Mapping[str, float]] = (),
    task_name: str | None = None,
) -> list[TaskResult]:
    """Every task in the store (optionally only those named ``task_name``)."""
    results: list[TaskResult] = []
    for batch in span_batches(store):
        results.extend(analyze(batch, variants, task_name=task_name))
    return results


def blame_store(
    store: Store,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    task_name: str | None = None,
    headline: Scenario | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.blame/v1`` report of the store, or None when it holds no task."""
    results = task_results(store, report.variants(scenarios), task_name)
    if not results:
        return None
    return report.blame(results, scenarios, percentile, headline)


def explain_stored_trace(store: Store, trace_id: str) -> TraceExplanation | None:
    """The first task of one stored trace, explained; None if the trace holds no task."""
    batch = SpanBatch.from_any(trace_spans(store, trace_id))
    if not len(batch):
        return None
    trace = Trace.build(batch, list(range(len(batch))))
    tasks = sorted(trace.tasks(), key=lambda i: trace.start[i])
    return explain(trace, tasks[0]) if tasks else None
