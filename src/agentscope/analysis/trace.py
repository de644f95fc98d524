"""One trace as a tree: local indices, clipped child intervals, tasks and orphans.

Everything downstream (critical path, attribution, what-if) works on these
index-based lists, so a trace is walked without one Python object per span.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentscope.analysis.batch import SpanBatch
from agentscope.analysis.repair import Repair, enclosed_siblings


@dataclass
class Trace:
    """A trace's spans; ``rows[i]`` is span i's row in the batch it came from."""

    batch: dict[str, list[Any]]
    """The batch's columns (``SpanBatch.columns``): a plain dict, so that each of the walk's column
    lookups is one in C (a ``SpanBatch.__getitem__`` call was a Python frame, about 280,000 of them
    per 100,000 spans)."""
    rows: list[int]
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    """The operation's name: tool name, model, DB system and operation, HTTP host, else span name."""
    orphans: list[int] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)
    handoffs: list[int] = field(default_factory=list)
    """CONSUMER spans under a PRODUCER: a message handed off, not waited on; off their parent's tree."""
    repairs: list[Repair] = field(default_factory=list)
    """Spans moved under another parent before the walk (``agentscope.analysis.repair``)."""

    @classmethod
    def build(cls, batch: SpanBatch, rows: list[int], *, repair: bool = True) -> Trace:
        """The tree of ``rows`` of ``batch``; ``repair=False`` keeps foreign trees exactly as recorded."""
        trace = cls(batch.columns, rows)
        span_ids = batch["span_id"]
        parent_ids = batch["parent_id"]
        starts, ends, kinds = batch["start_ns"], batch["end_ns"], batch["kind"]
        local = {span_ids[row]: i for i, row in enumerate(rows)}
        trace.start = start = [starts[row] for row in rows]
        trace.end = [e if e > s else s for s, e in zip(start, [ends[row] for row in rows])]
        trace.kind = [kinds[row] or "step" for row in rows]
        labels, names = batch["label"], batch["name"]
        trace.label = [labels[row] or names[row] or "" for row in rows]
        trace.children = [[] for _ in rows]
        span_kinds = batch["span_kind"]
        parents = []
        for i, row in enumerate(rows):
            parent_id = parent_ids[row]
            p = local.get(parent_id, -1) if parent_id is not None else -1
            if p == i:
                p = -1
            if p == -1:
                (trace.orphans if parent_id is not None else trace.roots).append(i)
            elif span_kinds[row] == "CONSUMER" and span_kinds[rows[p]] == "PRODUCER":
                trace.handoffs.append(i)
            else:
                trace.children[p].append(i)
            parents.append(p)
        trace.parent = parents
        if not trace.roots:
            trace.roots = list(trace.orphans)
        if repair:
            trace.repairs = enclosed_siblings(
                trace.start, trace.end, trace.kind, trace.parent, trace.children, trace.handoffs
            )
        return trace

    def __len__(self) -> int:
        return len(self.rows)

    def value(self, column: str, i: int) -> Any:
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
        return [c for c in candidates if any(kind[d] in ("llm", "tool") for d in self.descendants(c))]

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
