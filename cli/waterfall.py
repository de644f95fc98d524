"""``agentscope show``: a task's spans as a waterfall, with its critical path marked."""

from __future__ import annotations

from collections import Counter

from agentscope.cli.render import CATEGORY_COLORS, fit, ms_text
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agentscope.analysis.repair import Repair
from agentscope.analysis.tasks import TraceExplanation

FIXED = 42
"""Cells the kind, start, duration and on-path columns and the padding take."""
MAX_DEPTH = 8
"""Nesting indented deeper than this is drawn at this depth, so names keep their room."""


def _rules(repairs: list[Repair]) -> str:
    """How many repairs of each rule, e.g. ``4 same-call, 4 enclosed-sibling``."""
    return ", ".join(f"{n} {rule}" for rule, n in Counter(r.rule for r in repairs).items())


def waterfall(explanation: TraceExplanation, width: int = 120) -> Group:
    """The task's spans as rows of a ``width``-cell table: names cut with an ellipsis (never
    wrapped), the bars taking a third of what the fixed columns leave."""
    trace, task, result = explanation.trace, explanation.task, explanation.result
    bar_width = max(10, min(80, (width - FIXED) // 3))
    name_width = max(12, width - FIXED - bar_width)
    origin, total = trace.start[task], max(1, trace.end[task] - trace.start[task])
    repairs = explanation.repairs()
    repaired = {r.span for r in repairs}
    on_path: dict[int, int] = {}
    for span, a, b in explanation.segments:
        on_path[span] = on_path.get(span, 0) + (b - a)

    table = Table(box=None, pad_edge=False)
    table.add_column("span", no_wrap=True, overflow="ellipsis", max_width=name_width)
    table.add_column("kind", style="dim", no_wrap=True)
    table.add_column("start", justify="right", style="dim", no_wrap=True)
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("on path", justify="right", no_wrap=True)
    table.add_column("", width=bar_width, no_wrap=True)
    stack = [(task, 0)]
    while stack:
        span, depth = stack.pop()
        start, end = trace.start[span], trace.end[span]
        lo = min(bar_width - 1, int((max(start, origin) - origin) / total * bar_width))
        hi = max(lo + 1, int((min(end, origin + total) - origin) / total * bar_width))
        key = explanation.mixes[span][0][0].split(".")[0] if explanation.mixes[span] else "other"
        color = CATEGORY_COLORS.get(key, "white")
        critical = span in on_path
        bar = Text(" " * lo)
        bar.append("█" * (hi - lo) if critical else "░" * (hi - lo), style=color)
        indent = "  " * min(depth, MAX_DEPTH) + ("● " if critical else "  ")
        mark = " ↳" if span in repaired else ""
        name = Text(indent, style="bold red" if critical else "")
        name.append(fit(trace.value("name", span) or "", name_width - len(indent) - len(mark)))
        name.append(mark, style="yellow")
        table.add_row(
            name,
            trace.kind[span],
            ms_text((start - origin) / 1e6),
            ms_text((end - start) / 1e6),
            ms_text(on_path[span] / 1e6) if critical else "",
            bar,
        )
        children = sorted(trace.children[span], key=lambda c: trace.start[c], reverse=True)
        stack.extend((child, depth + 1) for child in children)

    attribution = "  ".join(
        f"{category} {ms_text(ns / 1e6)}" for category, ns in result.category_ns().items() if ns > 0
    )
    what = "" if explanation.is_task else "  (no task in this trace: its root)"
    header = Text(
        f"{result.name}  trace {result.trace_id}  {ms_text(result.duration_ns / 1e6)}{what}", style="bold"
    )
    notes = [Text("● on the critical path; █ blocking, ░ off the path", style="dim"), Text(attribution)]
    if repaired:
        notes.append(
            Text(
                f"↳ {len(repaired)} span(s) repaired ({_rules(repairs)}: foreign-trace repairs, "
                "docs/categories.md; --no-repair shows the tree as recorded)",
                style="yellow",
            )
        )
    if trace.orphans:
        notes.append(
            Text(
                f"{len(trace.orphans)} orphan span(s): parent not in the trace, or in a loop of parent ids",
                style="yellow",
            )
        )
    return Group(header, table, *notes)
