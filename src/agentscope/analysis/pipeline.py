"""Blame a whole store: read it in batches of traces, analyse each, aggregate once.

The only place the analysis stage touches I/O; everything it calls is pure.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace
from multiprocessing.context import BaseContext
from typing import Any

import pyarrow as pa

from agentscope.analysis import report
from agentscope.analysis.batch import REQUIRED, SpanBatch
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.tasks import (
    TaskResult,
    TraceExplanation,
    analyze,
    analyze_by_field,
    collector_paused,
    explain,
    task_name_of,
)
from agentscope.analysis.trace import Trace
from agentscope.analysis.whatif import Scenario
from agentscope.store.query import span_batches, trace_spans
from agentscope.store.selection import Selection
from agentscope.store.store import Store

PARALLEL_MIN_SPANS = 200_000
"""Below this many spans, starting worker processes costs more than it saves."""


def default_workers(store: Store) -> int:
    """One worker per core for large stores, else analyse in this process."""
    return (os.cpu_count() or 1) if store.span_count() >= PARALLEL_MIN_SPANS else 1


def _without_empty_columns(batch: pa.Table) -> pa.Table:
    """The batch less its optional columns that are null throughout, which the analysis reads as null
    when missing.  An Arrow column of nulls still carries its values: on traces without server
    timings, a worker is sent and unpickles 29% fewer bytes."""
    empty = [
        name for name in batch.column_names if name not in REQUIRED and batch[name].null_count == len(batch)
    ]
    return batch.drop_columns(empty)


def _worker_context() -> BaseContext:
    """Worker processes forked from a server that has imported the analysis once, where the platform
    has one: a spawned worker imports it itself (a quarter of a CPU-second each), and a fork of this
    process would copy the store's threads.  On a million rich spans with two workers, blame took 6%
    less time, and 2% less again with the server started before the first query (the first worker
    waits for its imports).  Spawned elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["agentscope.analysis.tasks"])
    multiprocessing.forkserver.ensure_running()  # its imports then overlap the first query
    return context


def task_results(
    store: Store,
    variants: Sequence[Mapping[str, float]] = (),
    task_name: str | None = None,
    workers: int | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    selection: Selection | None = None,
) -> list[TaskResult]:
    """Every task in the store, or those named ``task_name`` and kept by ``selection``.

    The selection is pushed into the store query (only traces that may hold a
    selected task are read), then checked exactly on each task.  Batches of
    whole traces are independent, so with ``workers`` > 1 they are analysed in
    worker processes, at most one batch ahead of each worker.
    """
    if task_name is not None:
        selection = replace(selection or Selection(), task=task_name)
    name = selection.task if selection else None
    workers = default_workers(store) if workers is None else workers
    results: list[TaskResult] = []
    if workers <= 1:
        for batch in span_batches(store, selection):
            results.extend(analyze(batch, variants, task_name=name, repair=repair, targets=targets))
    else:
        with (
            ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context()) as pool,
            collector_paused(),
        ):
            pending: deque[Future[list[TaskResult]]] = deque()
            for batch in span_batches(store, selection):
                pending.append(
                    pool.submit(
                        analyze_by_field,
                        _without_empty_columns(batch),
                        variants,
                        task_name=name,
                        repair=repair,
                        targets=targets,
                    )
                )
                while len(pending) > workers:
                    results.extend(map(TaskResult, *pending.popleft().result()))
            while pending:
                results.extend(map(TaskResult, *pending.popleft().result()))
    if selection:
        results = [r for r in results if selection.admits(r.name, r.start_ns)]
    return results


def blame_store(
    store: Store,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    task_name: str | None = None,
    headline: Scenario | None = None,
    workers: int | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    selection: Selection | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.blame/v1`` report of the store's selected tasks, or None when there is none.

    The collector stays paused until the report is built: the results were made while it was, so its
    first pass would walk every one of them (a third of a second per million spans) to free nothing.
    """
    with collector_paused():
        results = task_results(
            store, report.variants(scenarios), task_name, workers, repair, targets, selection
        )
        if not results:
            return None
        return report.blame(results, scenarios, percentile, headline, targets)


def explain_stored_trace(
    store: Store, trace_id: str, *, repair: bool = True, selection: Selection | None = None
) -> TraceExplanation | None:
    """The first task of one stored trace (the first ``selection`` admits), explained; None if the
    trace is not in the store (or holds no task the selection admits).

    A trace that holds no task has its earliest root explained instead
    (``is_task`` is False), so any trace can be drawn.
    """
    batch = SpanBatch.from_any(trace_spans(store, trace_id))
    if not len(batch):
        return None
    trace = Trace.build(batch, range(len(batch)), repair=repair)
    tasks = sorted(trace.tasks(), key=lambda i: trace.start[i])
    if selection:
        tasks = [i for i in tasks if selection.admits(task_name_of(trace, i), trace.start[i])]
        if not tasks:
            return None
    if tasks:
        return explain(trace, tasks[0])
    root = min(trace.roots or range(len(trace)), key=lambda i: (trace.start[i], -trace.end[i]))
    explanation = explain(trace, root)
    explanation.is_task = False
    return explanation
