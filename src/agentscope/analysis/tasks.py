"""The analysis core: a batch of whole traces in, one result per task out (DESIGN §10).

``analyze`` is a pure function of its input: no store, no CLI, no I/O.  It walks
the batch trace by trace inside one call, so it can run as it is over a bucket
of traces inside a distributed engine (e.g. Spark ``applyInPandas``), with only
the percentile step (``agentscope.analysis.report``) aggregated globally.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentscope.analysis import categories as C
from agentscope.analysis.attribution import OPERATION_KINDS, Mix, span_mixes
from agentscope.analysis.batch import SpanBatch
from agentscope.analysis.critical_path import Segment, critical_path
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.repair import Repair
from agentscope.analysis.targets import target_overrides
from agentscope.analysis.trace import Trace
from agentscope.analysis.whatif import Job, Resimulation, limits_missing, on_lines, reductions

ANALYSIS_VERSION = 3
"""Raise it when a change to the analysis changes any task's result: the task table's rows of an older
version are then analysed again (DESIGN §15)."""


@dataclass(slots=True)
class TaskResult:
    """One task's attribution: component times (ns, in ``categories.KEYS`` order) and more."""

    trace_id: str | None
    span_id: str
    name: str
    start_ns: int
    duration_ns: int
    accepted: bool
    components: list[float]
    operations: dict[str, tuple[str, float, int]] = field(default_factory=dict)
    """label → (category, inclusive critical-path ns, calls in the task)."""
    serial_llm_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    whatif_ns: list[float] = field(default_factory=list)
    """New duration under each variant passed to ``analyze``."""
    models: dict[str, list[int]] = field(default_factory=dict)
    """model → [input tokens, output tokens, cached input tokens, calls], for pricing."""
    repaired: int = 0
    """Spans of this task moved under another parent before the walk (DESIGN §5.1)."""
    calls_without_tokens: int = 0
    """LLM calls a candidate profile could not predict (no token counts): they keep their time."""

    def category_ns(self) -> dict[str, float]:
        out = dict.fromkeys(C.CATEGORIES, 0.0)
        for key, ns in zip(C.KEYS, self.components, strict=True):
            out[C.category_of(key)] += ns
        return out


RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(TaskResult))


@dataclass
class TraceExplanation:
    """Everything ``agentscope show`` draws for one task."""

    trace: Trace
    task: int
    segments: list[Segment]
    mixes: dict[int, Mix]
    between: dict[int, Mix]
    result: TaskResult
    is_task: bool = True
    """False when the trace holds no task and its root is explained instead."""
    leaves: set[int] = field(default_factory=set)
    """Spans whose subtree takes their mix (``attribution.Mixes.leaves``)."""
    provider_side: set[int] = field(default_factory=set)
    """Spans the provider recorded of an LLM call (``attribution.Mixes.provider_side``)."""
    spans: list[int] = field(default_factory=list)
    """The task and its descendants, parents first (``Trace.descendants``)."""

    def segment_mix(self, span: int, a: int, b: int) -> Mix:
        """The mix of the critical-path segment ``[a, b]`` on ``span``, as the attribution counted it."""
        return segment_mix(self.trace, self.task, self.mixes, self.between, span, a, b)

    def repairs(self) -> list[Repair]:
        return task_repairs(self.trace, self.spans)


def _walk_interval(trace: Trace, span: int, task: int) -> tuple[int, int]:
    """The span's interval as the walk from ``task`` sees it: clipped to every enclosing span up to it."""
    lo, hi = trace.start[span], trace.end[span]
    i = span
    while i != task and (i := trace.parent[i]) != -1:
        lo, hi = max(lo, trace.start[i]), min(hi, trace.end[i])
    return lo, hi


def _between_children(trace: Trace, task: int, span: int, a: int, b: int) -> bool:
    """Whether ``[a, b]`` of the span's own time lies after one child ended and before another began
    (the span and its children clipped as the critical path and the simulation see them)."""
    lo, hi = _walk_interval(trace, span, task)
    clipped = [(max(trace.start[c], lo), min(trace.end[c], hi)) for c in trace.children[span]]
    clipped = [(s, e) for s, e in clipped if s <= e]
    return any(e <= a for _, e in clipped) and any(s >= b for s, _ in clipped)


def _second_record(trace: Trace, i: int) -> bool:
    """Whether db or http span ``i`` is another record of its parent's operation, not an operation of its
    own: the only child of a span of its kind (OpenTelemetry's redis or httpx instrumentation beside
    agentscope's, in either order; SQLAlchemy's record of a statement around its driver's).  Its time
    stays on the path under its parent's label.  A span of the kind holding several (a repository
    call's queries) is an operation around operations, each counted."""
    p = trace.parent[i]
    kind = trace.kind
    return p != -1 and kind[p] == kind[i] and kind[i] in ("db", "http") and len(trace.children[p]) == 1


def task_repairs(trace: Trace, spans: Sequence[int]) -> list[Repair]:
    """The repairs of ``trace`` that moved one of ``spans`` (a task and its descendants)."""
    if not trace.repairs:
        return []
    in_task = set(spans)
    return [repair for repair in trace.repairs if repair.span in in_task]


def segment_mix(
    trace: Trace, task: int, mixes: dict[int, Mix], between: dict[int, Mix], span: int, a: int, b: int
) -> Mix:
    """A span's mix for a segment of its own time in ``task``: between two of its children, its
    ``between`` mix."""
    if span in between and _between_children(trace, task, span, a, b):
        return between[span]
    return mixes[span]


def _accepted(trace: Trace, task: int) -> bool:
    accepted = trace.value("accepted", task)
    if accepted is None:
        return trace.value("status", task) != "ERROR"
    return bool(accepted)


def task_name_of(trace: Trace, task: int) -> str:
    return trace.value("task_name", task) or trace.label[task] or "task"


def explain(
    trace: Trace,
    task: int,
    variants: Sequence[Mapping[str, float]] = (),
    *,
    targets: Sequence[CandidateProfile] = (),
) -> TraceExplanation:
    """Critical path, mixes and attribution of one task, re-simulated under each variant.

    Each of ``targets`` adds one more new duration after the variants' (DESIGN §12).
    """
    explanation = _attributed(trace, task)
    gathered = _WhatIfs(variants, targets)
    gathered.add(explanation)
    gathered.finish()
    return explanation


class _WhatIfs:
    """Explained tasks gathered for their what-if durations: under each variant, then on each target."""

    def __init__(self, variants: Sequence[Mapping[str, float]], targets: Sequence[CandidateProfile]) -> None:
        self.results: list[TaskResult] = []
        self.simulated = [*variants, *limits_missing(variants)]
        """The variants, then the inference limits their lines need (``whatif.on_lines``)."""
        self.shown = len(variants)
        self.variants = Resimulation(reductions(self.simulated)) if variants else None
        self.targets = targets
        self.on_targets = Resimulation(reductions([{}]) * len(targets)) if targets else None

    def add(self, e: TraceExplanation) -> None:
        self.results.append(e.result)
        if self.variants is not None:
            self.variants.add(Job(e.trace, e.task, e.mixes, e.leaves, e.between))
        if self.on_targets is not None:
            overrides, e.result.calls_without_tokens = target_overrides(
                e.trace, e.spans, e.mixes, e.provider_side, self.targets
            )
            self.on_targets.add(Job(e.trace, e.task, e.mixes, e.leaves, e.between, overrides))

    def finish(self) -> list[TaskResult]:
        """The results, each with its ``whatif_ns`` set: the variants' new durations, on their lines where
        they lie on them (``whatif.on_lines``), then the targets'."""
        if self.variants is not None:
            durations = self.variants.durations()
            on_lines(
                durations, np.array([r.duration_ns for r in self.results], dtype=np.int64), self.simulated
            )
            self._append(durations[:, : self.shown])
        if self.on_targets is not None:
            self._append(self.on_targets.durations())
        return self.results

    def _append(self, durations: np.ndarray) -> None:
        for result, added in zip(self.results, durations.tolist(), strict=True):
            result.whatif_ns = result.whatif_ns + added


def _attributed(trace: Trace, task: int) -> TraceExplanation:
    """Critical path, mixes and attribution of one task, without re-simulating it."""
    spans = trace.descendants(task)
    mixes, leaves, between, provider_side = span_mixes(trace, spans)
    segments = critical_path(trace, task)
    repaired = len(task_repairs(trace, spans))
    components = [0.0] * len(C.KEYS)
    index = C.KEY_INDEX
    on_path = [0] * len(trace)
    """Span → its critical-path ns (whole ns, so summing by span first changes no figure)."""
    for span, a, b in segments:
        length = b - a
        mix = segment_mix(trace, task, mixes, between, span, a, b) if span in between else mixes[span]
        for key, fraction in mix:
            components[index[key]] += length * fraction
        on_path[span] += length
    # One pass, parents first: each span's path time goes to every operation enclosing it (itself
    # included, each label once); calls, tokens and operations are counted, the provider's record of a
    # call left out.
    kind, labels, parent, call = trace.kind, trace.label, trace.parent, trace.call
    chains: dict[int, tuple[str, ...]] = {}
    path_ns: dict[str, float] = {}
    calls: dict[str, list[Any]] = {}
    """Label → [category, calls], in first-call order."""
    models: dict[str, list[int]] = {}
    serial_llm = llm_calls = input_tokens = output_tokens = cached_tokens = 0
    children = trace.children
    for i in spans:
        k = kind[i]
        label = labels[i]
        category = OPERATION_KINDS.get(k)
        enclosing = chains.get(parent[i], ())
        operation = category is not None and label not in enclosing
        length = on_path[i]
        if length:
            for outer in enclosing:
                path_ns[outer] = path_ns.get(outer, 0.0) + length
            if operation:
                path_ns[label] = path_ns.get(label, 0.0) + length
        if children[i]:  # only a parent's chain is looked up
            chains[i] = (*enclosing, label) if operation else enclosing
        if category is None or i in provider_side:
            continue
        if k == "llm":
            if length:
                serial_llm += 1
            llm_calls += 1
            usage = (
                call("input_tokens", i) or 0,
                call("output_tokens", i) or 0,
                call("cached_tokens", i) or 0,
            )
            input_tokens += usage[0]
            output_tokens += usage[1]
            cached_tokens += usage[2]
            tally = models.setdefault(label, [0, 0, 0, 0])
            tally[0] += usage[0]
            tally[1] += usage[1]
            tally[2] += usage[2]
            tally[3] += 1
        elif (k == "http" and kind[parent[i]] == "llm") or _second_record(trace, i):
            continue
        counted = calls.get(label)
        if counted is None:
            calls[label] = [category, 1]
        else:
            counted[1] += 1
    operations = {label: (category, path_ns.get(label, 0.0), n) for label, (category, n) in calls.items()}
    result = TaskResult(
        trace_id=trace.value("trace_id", task),
        span_id=trace.span_id(task),
        name=task_name_of(trace, task),
        start_ns=trace.start[task],
        duration_ns=trace.end[task] - trace.start[task],
        accepted=_accepted(trace, task),
        components=components,
        operations=operations,
        serial_llm_calls=serial_llm,
        llm_calls=llm_calls,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        models=models,
        repaired=repaired,
    )
    return TraceExplanation(
        trace, task, segments, mixes, between, result, leaves=leaves, provider_side=provider_side, spans=spans
    )


def analyze(
    spans: Any,
    variants: Sequence[Mapping[str, float]] = (),
    *,
    task_name: str | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
) -> list[TaskResult]:
    """Attribute every task in a batch of whole traces.

    ``spans`` is an Arrow table, a pandas DataFrame or a mapping of columns (see
    ``agentscope.analysis.batch.COLUMNS``); ``variants`` are speedup maps to
    re-simulate each task under; ``task_name`` keeps only tasks of that name;
    ``repair=False`` walks foreign trees exactly as recorded (DESIGN §5.1);
    each of ``targets`` appends the task's duration on that candidate to ``whatif_ns``.
    """
    with collector_paused():
        batch = spans if isinstance(spans, SpanBatch) else SpanBatch.from_any(spans)
        gathered = _WhatIfs(variants, targets)
        for trace in Trace.each(batch, repair=repair):
            for task in trace.tasks():
                if task_name is not None and task_name_of(trace, task) != task_name:
                    continue
                gathered.add(_attributed(trace, task))
        return gathered.finish()


def analyze_by_field(
    spans: Any, variants: Sequence[Mapping[str, float]] = (), **options: Any
) -> list[list[Any]]:
    """``analyze``'s results as one list per ``TaskResult`` field, in field order (``map(TaskResult,
    *fields)`` rebuilds them): what a worker process sends back.  Lists pickle in C, a dataclass per
    task through Python, and the lists take a third less time each way.

    It lives here, not with the pipeline, so that a worker process imports the analysis and not the
    store."""
    with collector_paused():
        results = analyze(spans, variants, **options)
        return [[getattr(result, name) for result in results] for name in RESULT_FIELDS]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a batch is analysed.

    The walk allocates millions of short-lived lists and tuples but creates no
    reference cycles, and the collector's passes over them cost about a tenth of
    the time. The pause is process-wide and ends with the batch.

    It holds from the batch's columns to what is made of its results (rows, lists by
    field): the collector's first pass after a pause walks every object made during it
    that is still alive, so a pause that ended with the results still held had them all
    walked, and the rows built after it set off more passes (a seventh of a worker's
    time on rich spans).  Nested pauses are one: the outermost ends it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
