"""``agentscope show``: a task's spans as a waterfall, with its critical path marked."""

from __future__ import annotations

from agentscope.cli.render import CATEGORY_COLORS, ms_text
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agentscope.analysis.tasks import TraceExplanation

WIDTH = 48


def waterfall(explanation: TraceExplanation) -> Group:
    trace, task, result = explanation.trace, explanation.task, explanation.result
    origin, total = trace.start[task], max(1, trace.end[task] - trace.start[task])
    repaired = {r.span for r in explanation.repairs()}
    on_path: dict[int, int] = {}
    for span, a, b in explanation.segments:
        on_path[span] = on_path.get(span, 0) + (b - a)

    table = Table(box=None, pad_edge=False)
    table.add_column("span")
    table.add_column("kind", style="dim")
    table.add_column("start", justify="right", style="dim")
    table.add_column("duration", justify="right")
    table.add_column("on path", justify="right")
    table.add_column("", min_width=WIDTH)
    stack = [(task, 0)]
    while stack:
        span, depth = stack.pop()
        start, end = trace.start[span], trace.end[span]
        lo = int((max(start, origin) - origin) / total * WIDTH)
        hi = max(lo + 1, int((min(end, origin + total) - origin) / total * WIDTH))
        key = explanation.mixes[span][0][0].split(".")[0] if explanation.mixes[span] else "other"
        color = CATEGORY_COLORS.get(key, "white")
        critical = span in on_path
        bar = Text(" " * lo)
        bar.append("█" * (hi - lo) if critical else "░" * (hi - lo), style=color)
        name = Text("  " * depth + ("● " if critical else "  "), style="bold red" if critical else "")
        name.append(trace.value("name", span) or "")
        if span in repaired:
            name.append(" ↳", style="yellow")
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
                f"↳ {len(repaired)} span(s) moved under the leaf step that encloses them "
                "(foreign-trace repair; --no-repair shows the tree as recorded)",
                style="yellow",
            )
        )
    if trace.orphans:
        notes.append(Text(f"{len(trace.orphans)} orphan span(s): parent not in the trace", style="yellow"))
    return Group(header, table, *notes)
