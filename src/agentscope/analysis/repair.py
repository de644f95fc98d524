"""Repair the trees other people's instrumentation writes, before the critical path walks them (DESIGN §5.1).

Peers lose context in known ways.  The one repaired here is the **enclosed
sibling**: LangGraph runs a node (``call_model``) and, inside it, the runnable
the node calls (``RunnableSequence`` → ``ChatOpenAI``); both OpenInference's and
OpenLLMetry's LangChain instrumentation record the node as a childless span
*beside* the runnable instead of above it.  The node ends a little after the
runnable, so the walk takes the node and the model call falls off the path.

Rule: under one parent, a span A with no children, of an orchestration kind
(task, agent, step), whose interval contains a sibling B's interval, while B's
subtree holds llm/tool/db/http spans — B (with its subtree) becomes A's child.
Of several such A, the shortest (then the earliest) takes B.

Limit: a leaf step that truly ran in parallel with B (a thread that did its own
untraced work while B ran) is treated as waiting for B, so the time they shared
goes to B's categories instead of the step's cpu/other.
"""

from __future__ import annotations

from typing import NamedTuple

ENCLOSED_SIBLING = "enclosed-sibling"
ORCHESTRATION_KINDS = frozenset({"task", "agent", "step"})
WORK_KINDS = frozenset({"llm", "tool", "db", "http"})


class Repair(NamedTuple):
    """One span moved under a new parent."""

    span: int
    rule: str
    new_parent: int


def _holds_work(kind: list[str], parent: list[int], handoffs: list[int]) -> list[bool]:
    """For each span, whether its subtree holds an llm/tool/db/http span (walking up from each)."""
    holds = [False] * len(kind)
    cut = set(handoffs)
    for i, k in enumerate(kind):
        if k not in WORK_KINDS:
            continue
        current = i
        while current != -1 and not holds[current]:
            holds[current] = True
            if current in cut:
                break
            current = parent[current]
    return holds


def enclosed_siblings(
    start: list[int],
    end: list[int],
    kind: list[str],
    parent: list[int],
    children: list[list[int]],
    handoffs: list[int],
) -> list[Repair]:
    """Apply the enclosed-sibling rule in place (``parent`` and ``children``); the repairs made."""
    repairs: list[Repair] = []
    holds: list[bool] | None = None
    for kids in children:
        if len(kids) < 2:
            continue
        hosts = [a for a in kids if not children[a] and kind[a] in ORCHESTRATION_KINDS]
        if not hosts:
            continue
        if holds is None:
            holds = _holds_work(kind, parent, handoffs)
        hosts.sort(key=lambda a: (end[a] - start[a], start[a]))
        moved = []
        for b in kids:
            if not holds[b]:
                continue
            host = next((a for a in hosts if start[a] <= start[b] and end[b] <= end[a]), None)
            if host is not None:
                moved.append((b, host))
        for b, host in moved:
            kids.remove(b)
            children[host].append(b)
            parent[b] = host
            repairs.append(Repair(b, ENCLOSED_SIBLING, host))
    return repairs
