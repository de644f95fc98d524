"""The what-if simulation as a walk span by span, in plain Python: the reference the batch simulation
(``agentscope.analysis.whatif.simulate_batch``) is held to in ``test_whatif.py``.

It follows DESIGN §6 literally: a frame per span with children, a heap of the siblings that have
ended, absolute new times; every variant in one walk.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from agentscope.analysis.attribution import Mix
from agentscope.analysis.trace import Trace
from agentscope.analysis.whatif import scale


def walk(
    trace: Trace,
    task: int,
    mixes: Mapping[int, Mix],
    leaves: set[int],
    tables: Sequence[Mapping[str, float]],
    between: Mapping[int, Mix] | None = None,
    overrides: Mapping[int, Sequence[float | None]] | None = None,
) -> list[float]:
    """The task's new duration (ns) under each variant, given its ``reductions`` tables.

    ``between`` gives, for some spans, the mix of their time between two children;
    ``overrides`` gives, for some spans, the new time per old time of their own mix
    in some variants (None: the variant's table decides) — a candidate profile's
    prediction of an LLM call (DESIGN §12).
    """
    start, end, children = trace.start, trace.end, trace.children
    by_mix: dict[int, list[float]] = {}
    between = between or {}
    overrides = overrides or {}

    def scales_of(mix: Mix) -> list[float]:
        vector = by_mix.get(id(mix))
        if vector is None:
            vector = by_mix[id(mix)] = [scale(mix, table) for table in tables]
        return vector

    def scales(i: int) -> list[float]:
        """New time per old time of span ``i``'s own mix, per variant."""
        vector = scales_of(mixes[i])
        if overrides and i in overrides:
            return [v if o is None else o for v, o in zip(vector, overrides[i], strict=True)]
        return vector

    def child_order(p: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """Children of ``p`` clipped to ``[lo, hi]``, by clipped start: (start, end, child)."""
        clipped = []
        for c in children[p]:
            s, e = start[c], end[c]
            s = s if s > lo else lo
            e = e if e < hi else hi
            if s <= e:
                clipped.append((s, e, c))
        clipped.sort()
        return clipped

    task_lo, task_hi = start[task], end[task]
    width = len(tables)
    # frame: [span, lo, hi, new start, ordered children, position, heap, pool old end, pool new ends, scales]
    frames = [
        [
            task,
            task_lo,
            task_hi,
            [0.0] * width,
            child_order(task, task_lo, task_hi) if task not in leaves else [],
            0,
            [],
            None,
            None,
            scales(task),
        ]
    ]
    result: list[float] = []
    while frames:
        frame = frames[-1]
        p, lo, hi, p_new_start, kids, position, heap, pool_old, pool_new, g = frame
        if position < len(kids):
            child_start, child_end, child = kids[position]
            frame[5] = position + 1
            while heap and heap[0][0] <= child_start:
                old_end, sibling_start, _, new_end = heapq.heappop(heap)
                if pool_old is None or sibling_start >= pool_old:
                    # Everything pooled ended before this sibling started: all are its
                    # predecessors, so it ends no earlier than any of them in every variant.
                    pool_new = new_end
                else:
                    pool_new = [b if b > a else a for a, b in zip(pool_new, new_end)]
                if pool_old is None or old_end > pool_old:
                    pool_old = old_end
            frame[7], frame[8] = pool_old, pool_new
            if pool_new is not None:
                base, gap = pool_new, child_start - pool_old
                if p in between:
                    g = scales_of(between[p])
            else:
                base, gap = p_new_start, child_start - lo
            grandchildren = (
                child_order(child, child_start, child_end)
                if children[child] and child not in leaves
                else None
            )
            if grandchildren:
                new_start = [n + gap * s for n, s in zip(base, g)]
                frames.append(
                    [
                        child,
                        child_start,
                        child_end,
                        new_start,
                        grandchildren,
                        0,
                        [],
                        None,
                        None,
                        scales(child),
                    ]
                )
            else:
                length = child_end - child_start
                # Most leaves share a mix already scaled: look it up without the call, unless a
                # candidate's override may replace it.
                own = by_mix.get(id(mixes[child])) if not overrides else None
                if own is None:
                    own = scales(child)
                new_end = [n + gap * s + length * c for n, s, c in zip(base, g, own)]
                heapq.heappush(heap, (child_end, child_start, child, new_end))
            continue
        frames.pop()
        finished = [(old_end, new_end) for old_end, _, _, new_end in heap]
        if pool_new is not None:
            finished.append((pool_old, pool_new))
        if finished:
            last_old = max(o for o, _ in finished)
            last_new = finished[0][1]
            for _, n in finished[1:]:
                last_new = [b if b > a else a for a, b in zip(last_new, n)]
            tail = hi - last_old
            new_end = [n + tail * s for n, s in zip(last_new, g)]
        else:
            new_end = [n + (hi - lo) * s for n, s in zip(p_new_start, g)]
        if frames:
            heapq.heappush(frames[-1][6], (hi, lo, p, new_end))
        else:
            result = new_end
    return result
