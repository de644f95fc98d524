"""One trace as a tree: local indices, clipped child intervals, tasks and orphans.

Everything downstream (critical path, attribution, what-if) works on these
index-based lists, so a trace is walked without one Python object per span.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from agentscope.analysis.batch import SpanBatch
from agentscope.analysis.repair import Repair, early_ends, enclosed_siblings, same_calls

_WORK = frozenset(("llm", "tool"))
"""The kinds of span that make a fallback candidate a task."""


@dataclass
class Trace:
    """A trace's spans; ``rows[i]`` is span i's row in the batch it came from."""

    batch: dict[str, list[Any]]
    """The batch's columns (``SpanBatch.columns``): a plain dict, so that each of the walk's column
    lookups is one in C (a ``SpanBatch.__getitem__`` call was a Python frame, about 280,000 of them
    per 100,000 spans)."""
    rows: range
    """The trace's rows of the batch (``SpanBatch`` keeps a trace's rows side by side)."""
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    """The operation's name: tool name, model, DB system and operation, HTTP host, else span name."""
    orphans: list[int] = field(default_factory=list)
    """Spans with a parent id but no parent to hang under: not in the trace, or in a loop of parent ids
    (malformed input, cut at the loop's earliest span; :func:`_cut_loops`)."""
    roots: list[int] = field(default_factory=list)
    handoffs: list[int] = field(default_factory=list)
    """CONSUMER spans under a PRODUCER: a message handed off, not waited on; off their parent's tree."""
    repairs: list[Repair] = field(default_factory=list)
    """Spans moved under another parent before the walk (``agentscope.analysis.repair``)."""
    merged: dict[int, dict[str, Any]] = field(default_factory=dict)
    """LLM call → what its other records of the same request supplied (``repair.same_calls``)."""

    @classmethod
    def build(cls, batch: SpanBatch, rows: range, *, repair: bool = True) -> Trace:
        """The tree of one trace's ``rows`` of ``batch``; ``repair=False`` keeps foreign trees exactly as
        recorded."""
        return cls._tree(batch, rows, _TreeColumns.of(batch, rows.start, rows.stop), repair)

    @classmethod
    def each(cls, batch: SpanBatch, *, repair: bool = True) -> Iterator[Trace]:
        """Every trace of ``batch`` in turn, its columns normalised once for the whole batch."""
        columns = _TreeColumns.of(batch, 0, len(batch))
        for rows in batch.traces():
            yield cls._tree(batch, rows, columns, repair)

    @classmethod
    def _tree(cls, batch: SpanBatch, rows: range, columns: _TreeColumns, repair: bool) -> Trace:
        """The tree of ``rows``, read from ``columns`` (which hold them)."""
        lo, hi = rows.start - columns.first, rows.stop - columns.first
        trace = cls(batch.columns, rows)
        trace.start = columns.start[lo:hi]
        trace.end = columns.end[lo:hi]
        trace.kind = kind = columns.kind[lo:hi]
        trace.label = columns.label[lo:hi]
        trace.children = children = [[] for _ in rows]
        local = dict(zip(columns.span_id[lo:hi], range(len(rows))))
        local.pop(None, None)  # a span without a parent id is a root, whatever span has no id
        parent_ids = columns.parent_id[lo:hi]
        trace.parent = parents = list(map(local.get, parent_ids, repeat(-1)))
        span_kinds = columns.span_kind
        consumers = "CONSUMER" in span_kinds[lo:hi]
        for i, p in enumerate(parents):
            if p == -1 or p == i:
                parents[i] = -1
                (trace.orphans if parent_ids[i] is not None else trace.roots).append(i)
            elif consumers and span_kinds[lo + i] == "CONSUMER" and span_kinds[lo + p] == "PRODUCER":
                trace.handoffs.append(i)
            else:
                children[p].append(i)
        _cut_loops(trace)
        if not trace.roots:
            trace.roots = list(trace.orphans)
        if repair:
            repairs = early_ends(trace)
            repairs += same_calls(trace)
            repairs += enclosed_siblings(trace.start, trace.end, kind, parents, children, trace.handoffs)
            trace.repairs = repairs
        return trace

    def __len__(self) -> int:
        return len(self.rows)

    def value(self, column: str, i: int) -> Any:
        return self.batch[column][self.rows[i]]

    def call(self, column: str, i: int) -> Any:
        """A call field of LLM span ``i`` (tokens, server timings, time to first token): what another record
        of the same request supplied where its own was lacking (``repair._fold``), else its own."""
        if self.merged:
            supplied = self.merged.get(i)
            if supplied is not None and column in supplied:
                return supplied[column]
        return self.batch[column][self.rows[i]]

    def span_id(self, i: int) -> str:
        return self.batch["span_id"][self.rows[i]]

    def descendants(self, root: int) -> list[int]:
        """``root`` and every span under it, parents before children."""
        order = [root]
        children = self.children
        for span in order:  # the list grows as it is walked: breadth first
            kids = children[span]
            if kids:
                order.extend(kids)
        return order

    def tasks(self) -> list[int]:
        """The tasks in this trace (DESIGN §5).

        Outermost spans of kind ``task``, whatever they hold (the user said so);
        else outermost agent invocations (not ``create_agent``) — but where one
        root holds several of them, they are steps of that root's request (graph
        nodes, sub-agents) and the root is the task; else the roots.  Such a
        fallback candidate whose subtree holds no llm and no tool span is not a
        task (a lone DB query, an agent being constructed).
        """
        kind = self.kind
        operation = self.batch["operation"]
        # A walk only where the kind occurs at all (a scan of the list in C): most traces have no task span.
        explicit = self._outermost(lambda i: kind[i] == "task") if "task" in kind else []
        if explicit:
            return explicit
        agents = (
            self._outermost(lambda i: kind[i] == "agent" and operation[self.rows[i]] != "create_agent")
            if "agent" in kind
            else []
        )
        if agents:
            by_root: dict[int, list[int]] = {}
            for agent in agents:
                by_root.setdefault(self.root_of(agent), []).append(agent)
            candidates = [found[0] if len(found) == 1 else root for root, found in by_root.items()]
        else:
            candidates = list(self.roots)
        return [c for c in candidates if not _WORK.isdisjoint(map(kind.__getitem__, self.descendants(c)))]

    def root_of(self, i: int) -> int:
        """The root (or orphan) above span ``i``."""
        parent = self.parent
        while parent[i] != -1:
            i = parent[i]
        return i

    def _outermost(self, matches: Any) -> list[int]:
        found = []
        stack = list(reversed(self.roots))
        while stack:
            i = stack.pop()
            if matches(i):
                found.append(i)
            else:
                stack.extend(reversed(self.children[i]))
        return found


@dataclass
class _TreeColumns:
    """Rows ``lo`` to ``hi`` of the columns a tree is built from, with the walk's defaults applied: an
    end before the start is the start, a span without a kind is a step, a label falls back to the name.

    Equal labels are made one string object: they key the results' operations and models, and pickle
    writes a repeated object once (a worker's results are a fifth smaller), hashing it once."""

    first: int
    """The batch row the columns start at."""
    span_id: list[Any]
    parent_id: list[Any]
    span_kind: list[Any]
    start: list[int]
    end: list[int]
    kind: list[str]
    label: list[str]

    @classmethod
    def of(cls, batch: SpanBatch, lo: int, hi: int) -> _TreeColumns:
        start = batch["start_ns"][lo:hi]
        labels = [label or name or "" for label, name in zip(batch["label"][lo:hi], batch["name"][lo:hi])]
        one_each: dict[str, str] = {}
        return cls(
            first=lo,
            span_id=batch["span_id"][lo:hi],
            parent_id=batch["parent_id"][lo:hi],
            span_kind=batch["span_kind"][lo:hi],
            start=start,
            end=[e if e > s else s for s, e in zip(start, batch["end_ns"][lo:hi])],
            kind=[k or "step" for k in batch["kind"][lo:hi]],
            label=list(map(one_each.setdefault, labels, labels)),
        )


def _cut_loops(trace: Trace) -> None:
    """Make every span reachable from a root, orphan or handoff: where parent ids loop (A under B under
    A; malformed input, or ids that collided), the loop is cut at its earliest-starting span, which
    becomes an orphan.  Left alone, a loop's spans were never walked, and the walks up the parents
    that some rules make (:mod:`agentscope.analysis.repair`) never ended.

    The spans reached from the tops are counted on every trace (1–2% of the walk, docs/performance.md);
    the loops are looked for only when the count falls short of the trace.
    """
    children = trace.children
    order = [*trace.roots, *trace.orphans, *trace.handoffs]
    for span in order:  # the list grows as it is walked
        kids = children[span]
        if kids:
            order.extend(kids)
    if len(order) == len(children):
        return
    reached = bytearray(len(children))
    for span in order:
        reached[span] = 1
    parent, start = trace.parent, trace.start
    for first in sorted((i for i in range(len(children)) if not reached[i]), key=start.__getitem__):
        if reached[first]:
            continue
        path: dict[int, None] = {}
        i = first
        while i not in path:  # every span not reached has a parent not reached: the chain loops
            path[i] = None
            i = parent[i]
        chain = list(path)
        cut = min(chain[chain.index(i) :], key=lambda j: (start[j], j))
        children[parent[cut]].remove(cut)
        parent[cut] = -1
        trace.orphans.append(cut)
        below = [cut]
        for span in below:
            reached[span] = 1
            below.extend(children[span])
