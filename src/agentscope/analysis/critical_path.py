"""The critical path of a task: the chain of spans its end time waited on (DESIGN §5).

Walking backwards from the task's end: inside span S at cursor time t, the next
piece of the path is the child of S with the latest end ≤ t (children clipped to
S; among equal ends the one that started first); the path continues inside that
child from its end, and the gaps between chosen children are S's own time.
Iterative, so a 10,000-deep chain needs no recursion.
"""

from __future__ import annotations

from agentscope.analysis.trace import Trace

Segment = tuple[int, int, int]
"""(span index, start ns, end ns)."""


def critical_path(trace: Trace, task: int) -> list[Segment]:
    """Segments that tile ``[start, end]`` of ``task`` exactly, in time order."""
    start, end, children = trace.start, trace.end, trace.children
    segments: list[Segment] = []
    emit = segments.append

    def latest_first(span: int) -> list[int]:
        """Children by end, latest first, equal ends by start: two sorts keyed in C (both stable, the
        second in reverse), where one keyed by a Python function called it for every child."""
        kids = sorted(children[span], key=start.__getitem__)
        kids.sort(key=end.__getitem__, reverse=True)
        return kids

    # frame: [span, lo, hi, its children latest-ending first, next child position, cursor]
    frames = [[task, start[task], end[task], latest_first(task), 0, end[task]]]
    while frames:
        frame = frames[-1]
        span, lo, hi, kids, position, cursor = frame
        chosen = False
        while position < len(kids):
            child = kids[position]
            position += 1
            child_end = end[child] if end[child] < hi else hi
            child_start = start[child] if start[child] > lo else lo
            if child_end > cursor or child_start >= child_end:
                continue
            if cursor > child_end:
                emit((span, child_end, cursor))
            if children[child]:
                frame[4] = position
                frame[5] = child_start
                frames.append([child, child_start, child_end, latest_first(child), 0, child_end])
                chosen = True
                break
            # A child without children is all its own time: one segment, no frame.
            emit((child, child_start, child_end))
            cursor = child_start
        if not chosen:
            if cursor > lo:
                emit((span, lo, cursor))
            frames.pop()
    segments.reverse()
    return segments
