"""Re-simulate a task with some categories sped up, keeping its happens-before order (DESIGN §6).

A leaf's new duration is its components each divided by its factor.  A child
starts after the latest-ending of its earlier siblings that had ended when it
started (its predecessors), plus the same gap, scaled; with no predecessor it
starts at the same offset into its parent, scaled.  A parent ends after its
last child that ended inside it, plus the same tail, scaled.  Every gap is the
parent's own time and scales with the parent's self-time mix.

All scenario variants of all tasks of a batch are simulated at once, in NumPy:
a subtree's new duration does not depend on when it starts, so spans are taken
deepest first, each parent's children in order of start, one child position
at a time across every parent of that depth; times are arrays with one column
per variant, relative to the parent's new start.  For a task whose spans all
sit directly under it, the sums are the ones a walk span by span would make,
in the same order; deeper, they differ from those in the last bits.

Limit: each depth level is a pass of array operations, shared by the whole
batch, so a batch holding one very deep task pays for its depth: 0.1 s for a
1,000-deep chain, 2.5 s for a 10,000-deep one (a walk span by span: 0.09 s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from agentscope.analysis import categories as C
from agentscope.analysis.attribution import Mix
from agentscope.analysis.trace import Trace
from agentscope.store.schema import LINE_TOLERANCE


@dataclass(frozen=True)
class Scenario:
    """A named set of speedups, e.g. ``inference x3.6`` = ``{"inference": 3.6}``."""

    name: str
    speedups: Mapping[str, float]

    @property
    def pessimistic(self) -> Mapping[str, float]:
        """The same speedups with unsplit inference left alone (it may be network or queue)."""
        if C.UNSPLIT in self.speedups or "inference" not in self.speedups:
            return self.speedups
        factor = self.speedups["inference"]
        rest = {k: v for k, v in self.speedups.items() if k != "inference"}
        rest.setdefault(C.PREFILL, factor)
        rest.setdefault(C.DECODE, factor)
        return rest


def inference_factor(speedups: Mapping[str, float]) -> tuple[float, bool] | None:
    """(factor, pessimistic) of a variant that speeds up inference alone, as a scenario ``inference xF``
    or its pessimistic form; None for any other."""
    if set(speedups) == {"inference"}:
        return speedups["inference"], False
    if set(speedups) == {C.PREFILL, C.DECODE} and speedups[C.PREFILL] == speedups[C.DECODE]:
        return speedups[C.PREFILL], True
    return None


def limits_missing(variants: Sequence[Mapping[str, float]]) -> list[dict[str, float]]:
    """The inference limits (``inference x∞``, optimistic or pessimistic) that :func:`on_lines` needs for
    ``variants`` and that they do not hold: to be simulated after them."""
    kinds = {inference_factor(v) for v in variants}
    limit = Scenario("inference x∞", {"inference": math.inf})
    return [
        dict(limit.pessimistic if pessimistic else limit.speedups)
        for pessimistic in (False, True)
        if any(kind is not None and kind[1] == pessimistic for kind in kinds)
        and (math.inf, pessimistic) not in kinds
    ]


def on_lines(durations: np.ndarray, duration_ns: np.ndarray, variants: Sequence[Mapping[str, float]]) -> None:
    """Put each task's new durations (one row a task, one column a variant) that lie within
    ``LINE_TOLERANCE`` of their line on it, in place.

    The line of an inference speedup f is the task's inference limit L (f = ∞, of the same form) plus
    what remains of the rest: L + (duration − L) / f.  A task whose critical path keeps its shape lies
    on it, but the simulation's sums reach it only to the last bits; on it exactly, the store keeps
    the what-if as null (``store.schema.LINE_TOLERANCE``), and both give the same value.  The limits'
    own columns are left as simulated; ``variants`` must hold those its inference speedups need
    (:func:`limits_missing`)."""
    kinds = [inference_factor(v) for v in variants]
    limits: dict[bool, int] = {}
    """Optimistic, pessimistic → the column of its limit, the first of them (as the store's)."""
    for j, kind in enumerate(kinds):
        if kind is not None and kind[0] == math.inf:
            limits.setdefault(kind[1], j)
    for j, kind in enumerate(kinds):
        if kind is None or limits.get(kind[1]) == j:
            continue
        factor, pessimistic = kind
        limit = durations[:, limits[pessimistic]]
        if factor == 1:
            line = duration_ns.astype(np.float64)
        elif factor == math.inf:
            line = limit
        else:
            line = limit + (duration_ns - limit) / factor
        column = durations[:, j]
        near = np.abs(column - line) <= LINE_TOLERANCE * duration_ns
        column[near] = line[near]


def reductions(variants: Sequence[Mapping[str, float]]) -> list[dict[str, float]]:
    """Per variant, ``1 − 1/f`` for every component key (0.0 where no factor applies)."""
    return [{key: 1.0 - 1.0 / C.factor_for(key, speedups) for key in C.KEYS} for speedups in variants]


def scale(mix: Mix, reduction: Mapping[str, float]) -> float:
    """New time per old time for a span with this mix: 1 − Σ fraction·(1 − 1/f).

    Exactly 1.0 when no factor applies, so all-ones speedups reproduce every duration.
    """
    total = 0.0
    for key, fraction in mix:
        r = reduction[key]
        if r:
            total += fraction * r
    return 1.0 - total


class Job(NamedTuple):
    """One task to re-simulate: its span mixes (``attribution.span_mixes``) and, for a candidate
    profile, the new time per old time it predicts for some spans' own mix, per variant (None: the
    variant's table decides; DESIGN §12)."""

    trace: Trace
    task: int
    mixes: Mapping[int, Mix]
    leaves: set[int]
    """Spans whose subtree takes their mix: simulated as leaves."""
    between: Mapping[int, Mix]
    """For some spans, the mix of their own time between two children."""
    overrides: Mapping[int, Sequence[float | None]] | None = None


def simulate_batch(jobs: Sequence[Job], tables: Sequence[Mapping[str, float]]) -> list[list[float]]:
    """Each job's new duration (ns) under each variant, given the variants' ``reductions`` tables."""
    batch = Resimulation(tables)
    for job in jobs:
        batch.add(job)
    return batch.durations().tolist()


class Resimulation:
    """Tasks gathered for one batch simulation: ``add`` each, then ``durations``.

    A job's trace is copied into flat lists as it is added, so a caller walking
    a batch trace by trace keeps no trace alive for the simulation's sake.
    """

    def __init__(self, tables: Sequence[Mapping[str, float]]) -> None:
        self.tables = tables
        self._start: list[int] = []
        self._end: list[int] = []
        self._parent: list[int] = []
        """Parent row, or -1: a root, a handoff (a message handed off is not waited on), a task."""
        self._roots: list[int] = []
        self._trace: Trace | None = None
        self._base = 0
        self._vectors: list[list[float]] = [[1.0] * len(tables)]
        self._index: dict[Mix, int] = {(): 0}
        """Mix → its row of the scale table; the empty mix scales by 1 in every variant."""
        self._own: list[int] = []
        self._between: dict[int, int] = {}
        self._leaves: list[int] = []

    def _row_of(self, mix: Mix) -> int:
        row = self._index.get(mix)
        if row is None:
            row = self._index[mix] = len(self._vectors)
            self._vectors.append([scale(mix, table) for table in self.tables])
        return row

    def add(self, job: Job) -> None:
        """Gather one task; tasks of one trace are added one after another."""
        trace = job.trace
        if trace is not self._trace:
            base = len(self._start)
            self._trace, self._base = trace, base
            self._start += trace.start
            self._end += trace.end
            self._parent += [p + base if p >= 0 else -1 for p in trace.parent]
            self._own += [0] * len(trace)
            for h in trace.handoffs:
                self._parent[base + h] = -1
        base = self._base
        self._roots.append(base + job.task)
        self._parent[base + job.task] = -1  # each task is simulated on its own, from its own start
        own, get = self._own, self._index.get
        for i, mix in job.mixes.items():
            row = get(mix)
            own[base + i] = row if row is not None else self._row_of(mix)
        self._leaves += [base + i for i in job.leaves]
        for i, mix in job.between.items():
            self._between[base + i] = self._row_of(mix)
        for i, predicted in (job.overrides or {}).items():
            vector = self._vectors[own[base + i]]
            own[base + i] = len(self._vectors)
            self._vectors.append([v if o is None else o for v, o in zip(vector, predicted, strict=True)])

    def durations(self) -> np.ndarray:
        """Each added task's new duration (ns) under each variant: a row a task, in the order added."""
        if not self._roots or not self.tables:
            return np.empty((len(self._roots), len(self.tables)))
        own = np.array(self._own, dtype=np.int64)
        between = own.copy()
        if self._between:
            between[list(self._between)] = list(self._between.values())
        leaf = np.zeros(len(own), dtype=bool)
        leaf[self._leaves] = True
        roots = np.array(self._roots, dtype=np.int64)
        spans = _Spans(
            start=np.array(self._start, dtype=np.int64),
            end=np.array(self._end, dtype=np.int64),
            parent=np.array(self._parent, dtype=np.int64),
            roots=roots,
            scales=np.array(self._vectors, dtype=np.float64),
            own=own,
            between=between,
            leaf=leaf,
        )
        return spans.durations()[roots]


_NO_TIME = np.iinfo(np.int64).min


@dataclass
class _Spans:
    """The gathered traces as arrays: every span of every trace a task was added from, one row each."""

    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    """Parent row, or -1 (a root, a handoff, a task)."""
    roots: np.ndarray
    """The tasks' rows."""
    scales: np.ndarray
    """One row per distinct mix (and per candidate's prediction): new time per old time, per variant."""
    own: np.ndarray
    """Each span's row of ``scales`` for its own time."""
    between: np.ndarray
    """Each span's row of ``scales`` for its own time between two children."""
    leaf: np.ndarray
    """Spans whose subtree takes their mix."""

    def _depths(self) -> np.ndarray:
        """Each span's depth under its top (a task, a root, a handoff); -1 inside a parent cycle."""
        depth = (self.parent >= 0).astype(np.int64)
        jump = self.parent.copy()
        for _ in range(len(jump).bit_length() + 1):  # pointer doubling: log2(depth) passes
            linked = jump >= 0
            if not linked.any():
                return depth
            target = np.where(linked, jump, 0)
            depth = depth + np.where(linked, depth[target], 0)
            jump = np.where(linked, jump[target], -1)
        depth[jump >= 0] = -1
        return depth

    def durations(self) -> np.ndarray:
        """New duration of every span the jobs' walks reach, relative to its new start, per variant."""
        depth = self._depths()
        parent, leaf = self.parent, self.leaf
        lo, hi = self.start.copy(), self.end.copy()
        active = np.zeros(len(lo), dtype=bool)
        active[self.roots] = True
        by_depth = np.argsort(depth, kind="stable")
        edges = np.searchsorted(depth[by_depth], np.arange(depth.max() + 2))
        levels = [by_depth[edges[d] : edges[d + 1]] for d in range(1, len(edges) - 1)]
        for spans in levels:  # clipped to the parent's clipped interval, as the walk sees them
            above = parent[spans]
            lo[spans] = np.maximum(lo[spans], lo[above])
            hi[spans] = np.minimum(hi[spans], hi[above])
            active[spans] = active[above] & ~leaf[above] & (lo[spans] <= hi[spans])
        # A span without children in the walk is all its own time.
        duration = self.scales.take(self.own, axis=0)
        duration *= (hi - lo)[:, None]
        kids = np.flatnonzero(active & (parent >= 0))
        if not len(kids):
            return duration
        kids = kids[np.lexsort((kids, hi[kids], lo[kids], parent[kids]))]
        first = np.flatnonzero(np.r_[True, parent[kids][1:] != parent[kids][:-1]])
        counts = np.diff(np.r_[first, len(kids)])
        owners = parent[kids[first]]
        owner_depth = depth[owners]
        for d in _distinct(owner_depth)[::-1]:  # deepest parents first: their children are done
            at_depth = np.flatnonzero(owner_depth == d)
            sizes = np.ceil(np.log2(counts[at_depth])).astype(np.int64)
            for size in _distinct(sizes):
                group = at_depth[sizes == size]
                duration[owners[group]] = self._parents(group, first, counts, kids, owners, lo, hi, duration)
        return duration

    def _parents(
        self,
        group: np.ndarray,
        first: np.ndarray,
        counts: np.ndarray,
        kids: np.ndarray,
        owners: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        duration: np.ndarray,
    ) -> np.ndarray:
        """New durations of the parents ``group`` (positions in ``owners``), from their children's.

        The children's new ends are kept a slab a child position, and their latest as it goes: an
        array a (parent, position, variant) was a copy of every child's durations, then a strided
        write a position and a pass over all of it for the latest, and on rich spans this took a
        fifth of the walk, most of it in writing fresh memory."""
        count = counts[group]
        width = int(count.max())
        position = np.arange(width)
        valid = position[None, :] < count[:, None]
        child = kids[np.minimum(first[group][:, None] + position[None, :], len(kids) - 1)]
        child_lo = lo[child]
        child_hi = np.where(valid, hi[child], np.iinfo(np.int64).max)
        # Each row's children by end, then start: the order they join the pool of predecessors.
        by_end = np.lexsort((np.broadcast_to(position, child.shape), child_hi), axis=1)
        p = owners[group]
        own, between = self.scales[self.own[p]], self.scales[self.between[p]]
        rows = np.arange(len(group))
        pointer = np.zeros(len(group), dtype=np.int64)
        pooled = np.zeros(len(group), dtype=bool)
        pool_old = np.full(len(group), _NO_TIME)
        pool_new = np.full(own.shape, -np.inf)
        new_end = np.empty((width, *own.shape))  # a slab a child position: parents by variants
        last_new = np.full(own.shape, -np.inf)
        for k in range(width):
            start_k = child_lo[:, k]
            live = count > k
            while True:  # predecessors: the earlier children that had ended when this one started
                candidate = by_end[rows, np.minimum(pointer, width - 1)]
                joins = live & (pointer < count) & (candidate < k) & (child_hi[rows, candidate] <= start_k)
                if not joins.any():
                    break
                r, c = rows[joins], candidate[joins]
                pool_old[r] = np.maximum(pool_old[r], child_hi[r, c])
                pool_new[r] = np.maximum(pool_new[r], new_end[c, r])
                pooled[r] = True
                pointer[r] += 1
            slab = new_end[k]
            np.multiply((start_k - lo[p])[:, None], own, out=slab)  # from the parent's start
            if pooled.any():  # after the latest-ending predecessor
                after = pooled.nonzero()[0]
                slab[after] = pool_new[after] + (start_k[after] - pool_old[after])[:, None] * between[after]
            slab += duration[child[:, k]]
            np.maximum(last_new, slab, out=last_new, where=live[:, None])
        last_old = np.where(valid, child_hi, _NO_TIME).max(axis=1)
        return last_new + (hi[p] - last_old)[:, None] * own


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an array of small non-negative integers, ascending.

    ``np.unique`` would do, but its first call imports ``numpy.ma`` (11 ms in every worker process).
    """
    return np.flatnonzero(np.bincount(values))
