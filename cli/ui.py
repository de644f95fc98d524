"""``agentscope ui``: a local web app over the store, and the JSON API it draws from (DESIGN §13).

The API gives the CLI's own documents — ``/api/blame`` is ``blame --format json``,
``/api/traces/{id}`` is ``show --format json`` — for the selection in the query
string (``task``, ``service``, ``since``, ``until``, ``repair=0``).  Every request
reads a snapshot of the store (DESIGN §11), so the app can keep writing; results
are kept per selection until the store changes.  The page is plain HTML, CSS and
JavaScript served by the app itself: nothing is fetched from the network.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentscope.analysis import report
from agentscope.analysis.pipeline import (
    ROW_VARIANTS,
    HeldRows,
    KeptRows,
    blame_store,
    blame_table,
    curve_table,
    explain_stored_trace,
    kept_rows,
    latency_curve,
    row_picks,
    task_results,
)
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.report import nearest_rank, trace_report
from agentscope.analysis.tasks import TaskResult, TraceExplanation, collector_paused
from agentscope.budget.catalog import load as load_catalog
from agentscope.budget.pipeline import budget_store
from agentscope.budget.report import curve_rows, distribution
from agentscope.store.query import span_details, span_overview
from agentscope.store.selection import Selection, SelectionError
from agentscope.store.shared import SharedStore
from agentscope.store.store import Store, StoreError
from agentscope.store.tasks import names_of

STATIC = Path(__file__).parent / "ui_static"
TASKS_SCHEMA = "agentscope.tasks/v1"
SPANS_SCHEMA = "agentscope.spans/v1"
CACHED_SELECTIONS = 16
CACHED_ROWS = 4
"""Selections whose rows (with every what-if time) are kept, each for the store's latest content only:
a month of rows is hundreds of MB."""
CURVE_SCHEMA = "agentscope.curve/v1"
"""``GET /api/curve``: the budget document's what-if curve and duration distribution, alone."""


class Problem(Exception):
    """A request the API answers with an error document: ``{"error": message}`` and a status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class StoreView:
    """Reads of one store for the API, with results remembered per selection until the store changes."""

    def __init__(self, path: Path, targets: Sequence[CandidateProfile] = ()) -> None:
        self.path = path
        self.shared = SharedStore(path)
        self.catalog = load_catalog(None)
        self.targets = tuple(targets)
        """The candidates whose predicted p50/p95 the budget puts beside their cost."""
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._rows: OrderedDict[Selection, KeptRows] = OrderedDict()
        self._held = HeldRows()
        """New rows of analysed traces, written back every few seconds rather than at each request."""
        self._lock = threading.Lock()

    def write_held(self) -> None:
        """Write the rows still held back (the UI stops), so the next reader need not analyse them."""
        self._held.write(self.shared)

    def _version(self) -> tuple[int, int]:
        """What every answer depends on: the spans stored, as :meth:`Store.content_version` numbers them
        (a reader's rows written back leave it as it is, so they do not make the next request miss)."""
        if not self.path.exists():
            raise Problem(f"store {self.path} does not exist yet", 404)
        try:
            return self.shared.answer(Store.content_version)
        except StoreError as exc:
            raise Problem(str(exc), 503) from None

    def _remember(
        self, key: tuple[Any, ...], compute: Callable[[], Any], version: tuple[int, int] | None = None
    ) -> Any:
        """``compute()``, kept for the store's content of that ``version`` (read here when not given:
        :meth:`_version`)."""
        key = (version or self._version(), *key)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = compute()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > CACHED_SELECTIONS:
                self._cache.popitem(last=False)
        return value

    def _read(self, work: Callable[[Any], Any]) -> Any:
        if not self.path.exists():
            raise Problem(f"store {self.path} does not exist yet", 404)
        try:
            with self.shared.reading() as store:
                return work(store)
        except StoreError as exc:
            raise Problem(str(exc), 503) from None

    def _analyse(self, work: Callable[[SharedStore], Any]) -> Any:
        """``work`` on the store file itself, which answers from its task table (no snapshot)."""
        if not self.path.exists():
            raise Problem(f"store {self.path} does not exist yet", 404)
        try:
            return work(self.shared)
        except StoreError as exc:
            raise Problem(str(exc), 503) from None

    def rows(self, selection: Selection) -> KeptRows:
        """The task table's rows of the selection with every what-if time (``kept_rows``), current: the
        last read's rows, brought up to date with what was kept and written since.  Its ``version`` is
        the store's content as read, in the same read, so an answer from them needs no other.

        The rows of the traces analysed here are held back and written every few seconds, on a thread
        of their own (``HeldRows``): no request waits for the write."""
        with self._lock:
            previous = self._rows.get(selection)
        every = range(len(ROW_VARIANTS))
        with collector_paused():
            rows = self._analyse(
                lambda s: kept_rows(s, every, selection=selection, previous=previous, held=self._held)
            )
        with self._lock:
            self._rows[selection] = rows
            self._rows.move_to_end(selection)
            while len(self._rows) > CACHED_ROWS:
                self._rows.popitem(last=False)
        return rows

    def _from_rows(
        self, key: tuple[Any, ...], selection: Selection, answer: Callable[[pa.Table], Any]
    ) -> Any:
        """``answer`` of the selection's current rows (:meth:`rows`), kept for the content they were read
        at."""
        rows = self.rows(selection)
        return self._remember(key, lambda: answer(rows.table), rows.version)

    def blame(self, selection: Selection, repair: bool, percentile: float) -> dict[str, Any] | None:
        """The blame document, from the task table's columns (``blame_store``)."""
        picks = row_picks(report.variants(report.DEFAULT_SCENARIOS), repair, ())

        key = ("blame", selection, repair, percentile)
        if picks is not None:
            return self._from_rows(
                key, selection, lambda rows: blame_table(rows, percentile=percentile, picks=picks)
            )
        return self._remember(
            key,
            lambda: self._analyse(
                lambda s: blame_store(s, percentile=percentile, repair=repair, selection=selection)
            ),
        )

    def results(self, selection: Selection, repair: bool) -> list[TaskResult]:
        variants = report.variants(report.DEFAULT_SCENARIOS)
        return self._remember(
            ("results", selection, repair),
            lambda: self._analyse(lambda s: task_results(s, variants, repair=repair, selection=selection)),
        )

    def budget(self, selection: Selection, repair: bool, tasks_per_month: float) -> dict[str, Any] | None:
        return self._remember(
            ("budget", selection, repair, tasks_per_month),
            lambda: self._analyse(
                lambda s: budget_store(
                    s, self.catalog, tasks_per_month, repair=repair, targets=self.targets, selection=selection
                )
            ),
        )

    def curve(self, selection: Selection, repair: bool) -> dict[str, Any] | None:
        """The overview's what-if curve and histogram: the budget document's, from the task table."""
        picks = row_picks(report.variants(report.curve_scenarios()), repair, ())

        def document(
            found: tuple[list[tuple[float, float, float]], list[float]] | None,
        ) -> dict[str, Any] | None:
            if found is None:
                return None
            points, durations = found
            return {
                "schema": CURVE_SCHEMA,
                "curve": curve_rows(points),
                "distribution_ms": distribution(durations),
            }

        key = ("curve", selection, repair)
        if picks is not None:
            return self._from_rows(key, selection, lambda rows: document(curve_table(rows, picks)))
        return self._remember(
            key, lambda: document(self._analyse(lambda shared: latency_curve(shared, selection, repair)))
        )

    def explain(self, trace_id: str, selection: Selection, repair: bool) -> tuple[TraceExplanation, dict]:
        def work(store: Any) -> tuple[TraceExplanation, dict]:
            explanation = explain_stored_trace(store, trace_id, repair=repair, selection=selection)
            if explanation is None:
                matching = f" with a task{selection.describe()}" if selection else ""
                raise Problem(f"no trace {trace_id}{matching} in {self.path}", 404)
            return explanation, span_details(store, trace_id)

        return self._remember(("trace", trace_id, selection, repair), lambda: self._read(work))

    def overview(self) -> dict[str, Any]:
        """Task names and services from the task table's rows (current: the traces written since,
        analysed), and what the spans tell."""

        def document(rows: pa.Table) -> dict[str, Any]:
            names, services = names_of(rows)
            spans = self._analyse(lambda shared: shared.answer(span_overview))
            return {"task_names": names, "services": services, **spans}

        return self._from_rows(("overview",), Selection(), document)


def _selection(request: Request) -> tuple[Selection, bool]:
    query = request.query_params
    try:
        selection = Selection.parse(
            query.get("task"), query.get("service"), query.get("since"), query.get("until")
        )
    except SelectionError as exc:
        raise Problem(str(exc)) from None
    return selection, query.get("repair", "1") not in ("0", "false", "no")


def _number(request: Request, name: str, default: float, low: float, high: float) -> float:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise Problem(f"{name}={text!r}: expected a number") from None
    if not (low <= value <= high) or math.isnan(value):
        raise Problem(f"{name}={text!r}: expected a number from {low:g} to {high:g}")
    return value


def task_rows(results: list[TaskResult], limit: int, offset: int) -> dict[str, Any]:
    """The tasks slowest first, each with its rank and whether it is in the p95 budget's window."""
    ranked = sorted(results, key=lambda r: (-r.duration_ns, r.trace_id or "", r.span_id))
    n = len(ranked)
    durations = [r.duration_ns for r in reversed(ranked)]
    low, high = report.window_ranks(n, 95)
    rows = []
    for i, r in enumerate(ranked[offset : offset + limit], start=offset):
        ascending = n - i
        rows.append(
            {
                "trace_id": r.trace_id,
                "span_id": r.span_id,
                "name": r.name,
                "start": datetime.fromtimestamp(r.start_ns / 1e9, timezone.utc).isoformat(
                    timespec="milliseconds"
                ),
                "duration_ms": r.duration_ns / 1e6,
                "accepted": r.accepted,
                "rank": i + 1,
                "in_p95_window": low <= ascending <= high,
                "categories": {category: ns / 1e6 for category, ns in r.category_ns().items()},
            }
        )
    return {
        "schema": TASKS_SCHEMA,
        "count": n,
        "p95_ms": nearest_rank(durations, 95) / 1e6 if n else None,
        "offset": offset,
        "limit": limit,
        "tasks": rows,
    }


def span_rows(explanation: TraceExplanation, details: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every span of the explained task in tree order, for the waterfall: times from the task's
    start, depth, dominant category, time on the critical path, repairs, attributes."""
    trace, task = explanation.trace, explanation.task
    origin = trace.start[task]
    on_path: dict[int, int] = {}
    for span, a, b in explanation.segments:
        on_path[span] = on_path.get(span, 0) + (b - a)
    repairs = {r.span: r for r in explanation.repairs()}
    rows = []
    stack = [(task, 0)]
    while stack:
        span, depth = stack.pop()
        span_id = trace.span_id(span)
        mix = explanation.mixes.get(span) or []
        repair = repairs.get(span)
        rows.append(
            {
                "span_id": span_id,
                "parent_id": trace.span_id(trace.parent[span]) if trace.parent[span] >= 0 else None,
                "name": trace.value("name", span),
                "kind": trace.kind[span],
                "depth": depth,
                "start_ms": (trace.start[span] - origin) / 1e6,
                "end_ms": (trace.end[span] - origin) / 1e6,
                "category": mix[0][0].split(".")[0] if mix else "other",
                "on_path_ms": on_path.get(span, 0) / 1e6,
                "repaired": {"rule": repair.rule, "new_parent_id": trace.span_id(repair.new_parent)}
                if repair
                else None,
                **details.get(span_id, {"status": None, "service": None, "attributes": {}}),
            }
        )
        children = sorted(trace.children[span], key=lambda c: trace.start[c], reverse=True)
        stack.extend((child, depth + 1) for child in children)
    return {"schema": SPANS_SCHEMA, "trace_id": explanation.result.trace_id, "spans": rows}


def create_app(store: Path, targets: Sequence[CandidateProfile] = ()) -> Starlette:
    """The UI's app over the store at ``store`` (which may not exist yet: the API says so); its budget
    predicts each of ``targets``."""
    view = StoreView(store, targets)

    def api(handler: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(handler(request))
            except Problem as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)

        return endpoint

    def found(document: dict[str, Any] | None, selection: Selection) -> dict[str, Any]:
        """A document of the selected tasks, or 404 when there are none."""
        if document is None:
            raise Problem(f"no tasks{selection.describe()} in {store}", 404)
        return document

    def blame(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        return found(view.blame(selection, repair, _number(request, "percentile", 95, 1, 100)), selection)

    def tasks(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        limit = int(_number(request, "limit", 100, 1, 1000))
        offset = int(_number(request, "offset", 0, 0, 1e12))
        return task_rows(view.results(selection, repair), limit, offset)

    def trace(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        explanation, _ = view.explain(request.path_params["trace_id"].lower(), selection, repair)
        return trace_report(explanation)

    def spans(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        explanation, details = view.explain(request.path_params["trace_id"].lower(), selection, repair)
        return span_rows(explanation, details)

    def budget(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        return found(
            view.budget(selection, repair, _number(request, "tasks_per_month", 10_000, 0, 1e12)), selection
        )

    def curve(request: Request) -> dict[str, Any]:
        selection, repair = _selection(request)
        return found(view.curve(selection, repair), selection)

    def overview(request: Request) -> dict[str, Any]:
        return {"store": str(store), **view.overview()}

    def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(view.write_held)  # it may wait for the store's lock

    return Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", index),
            Route("/api/blame", api(blame)),
            Route("/api/tasks", api(tasks)),
            Route("/api/traces/{trace_id}", api(trace)),
            Route("/api/traces/{trace_id}/spans", api(spans)),
            Route("/api/budget", api(budget)),
            Route("/api/curve", api(curve)),
            Route("/api/overview", api(overview)),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
    )
