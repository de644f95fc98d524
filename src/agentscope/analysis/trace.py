"""One trace as a tree: local indices, clipped child intervals, tasks and orphans.

Everything downstream (critical path, attribution, what-if) works on these
index-based lists, so a trace is walked without one Python object per span.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentscope.analysis.batch import SpanBatch


@dataclass
class Trace:
    """A trace's spans; ``rows[i]`` is span i's row in the batch it came from."""

    batch: SpanBatch
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

    @classmethod
    def build(cls, batch: SpanBatch, rows: list[int]) -> Trace:
        trace = cls(batch, rows)
        span_ids = batch["span_id"]
        parent_ids = batch["parent_id"]
        starts, ends, kinds = batch["start_ns"], batch["end_ns"], batch["kind"]
        local = {span_ids[row]: i for i, row in enumerate(rows)}
        trace.start = [starts[row] for row in rows]
        trace.end = [max(ends[row], starts[row]) for row in rows]
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
        k = 0
        while k < len(order):
            order.extend(children[order[k]])
            k += 1
        return order

    def tasks(self) -> list[int]:
        """The tasks in this trace (DESIGN §5).

        Outermost spans of kind ``task``; else outermost agent invocations (not
        ``create_agent``); else the roots.  A candidate whose subtree holds no llm
        and no tool span is not a task.
        """
        kind = self.kind
        operation = self.batch["operation"]
        candidates = self._outermost(lambda i: kind[i] == "task")
        if not candidates:
            candidates = self._outermost(
                lambda i: kind[i] == "agent" and operation[self.rows[i]] != "create_agent"
            )
        if not candidates:
            candidates = list(self.roots)
        return [c for c in candidates if any(kind[d] in ("llm", "tool") for d in self.descendants(c))]

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
