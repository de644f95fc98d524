"""Render analysis results for people: rich tables for the terminal, markdown for documents."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentscope.analysis.probing import ProbeCall, residual_bands
from agentscope.analysis.profiles import UNITS, CandidateProfile

BAR_WIDTH = 30
CATEGORY_COLORS = {
    "inference": "magenta",
    "queue": "yellow",
    "network": "cyan",
    "tool": "green",
    "db": "blue",
    "retry": "red",
    "cpu": "white",
    "other": "bright_black",
}


def _load(row: Mapping[str, Any]) -> str:
    """What load a target's prediction assumes: the calls in flight its profile was measured at."""
    if "target" not in row:
        return ""
    concurrency = row.get("concurrency")
    return (
        f" ({concurrency} call{'s' if concurrency != 1 else ''} at once)"
        if concurrency
        else " (load not stated)"
    )


def ms_text(ms: float) -> str:
    if ms >= 10_000:
        return f"{ms / 1000:.1f} s"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.1f} ms"


def _bar(share: float, color: str, width: int = BAR_WIDTH) -> Text:
    filled = share * width
    whole = int(filled)
    text = Text("█" * whole, style=color)
    if filled - whole >= 0.5:
        text.append("▌", style=color)
    return text


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis, never wrapped."""
    if cell_len(text) <= width:
        return text
    out = ""
    for char in text:
        if cell_len(out + char) > width - 1:
            break
        out += char
    return out + "…"


class Items:
    """Items joined by ", " that wrap between items, never inside one (an item wider than the
    column is cut with an ellipsis), so "prefill 376.0 ms" is never split across lines."""

    def __init__(self, items: Sequence[str], style: str = "") -> None:
        self.items = list(items)
        self.style = style

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widths = [cell_len(item) for item in self.items] or [0]
        return Measurement(min(max(widths) + 1, options.max_width), sum(widths) + 2 * (len(widths) - 1))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 2)
        lines: list[str] = []
        line = ""
        for n, item in enumerate(self.items):
            last = n == len(self.items) - 1
            item = fit(item, width - (0 if last else 1))
            candidate = f"{line}, {item}" if line else item
            if cell_len(candidate) + (0 if last else 1) <= width:
                line = candidate
            else:
                lines.append(line + ",")
                line = item
        if line:
            lines.append(line)
        for text in lines:
            yield Text(text, style=self.style, no_wrap=True, overflow="ellipsis")


def _component_items(row: Mapping[str, Any]) -> list[str]:
    return [f"{name} {ms_text(ms)}" for name, ms in row["components"].items() if ms > 0.0005]


def _components(row: Mapping[str, Any]) -> str:
    return ", ".join(_component_items(row))


def _speedups(speedups: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}×{'∞' if value == 'inf' else f'{value:g}'}" for key, value in speedups.items())


def blame_renderable(report: Mapping[str, Any], width: int = 120) -> Group:
    """The blame report as a terminal page: headline numbers, budget bars, operations, what-if.

    ``width`` is the console's: the bars narrow on small terminals, names are cut
    with an ellipsis rather than wrapped, and component lists wrap between items.
    """
    bar_width = BAR_WIDTH if width >= 100 else max(10, BAR_WIDTH - (100 - width))
    latency = report["latency_ms"]
    tasks = report["tasks"]
    p = report["percentile"]
    head = Text()
    head.append(f"{tasks['count']} tasks", style="bold")
    head.append(f" ({tasks['accepted']} accepted; {', '.join(tasks['names'])})   ")
    for key in ("p50", "p95", "p99"):
        head.append(f"{key} ", style="dim")
        head.append(f"{ms_text(latency[key])}   ", style="bold")

    budget = Table(title=f"What a p{p:g} task is made of", title_justify="left", box=None, pad_edge=False)
    budget.add_column("category", no_wrap=True)
    budget.add_column("ms", justify="right", no_wrap=True)
    budget.add_column("share", justify="right", no_wrap=True)
    budget.add_column("", width=bar_width, no_wrap=True)
    budget.add_column("components")
    for row in report["budget"]:
        color = CATEGORY_COLORS[row["category"]]
        budget.add_row(
            Text(row["category"], style=color),
            ms_text(row["ms"]),
            f"{row['share']:.0%}",
            _bar(row["share"], color, bar_width),
            Items(_component_items(row), style="dim"),
        )

    operations = Table(title="Top operations on the critical path", title_justify="left", box=None)
    operations.add_column("operation", no_wrap=True, overflow="ellipsis", max_width=max(16, width - 44))
    operations.add_column("category", no_wrap=True)
    operations.add_column("ms", justify="right", no_wrap=True)
    operations.add_column("share", justify="right", no_wrap=True)
    operations.add_column("calls/task", justify="right", no_wrap=True)
    for op in report["operations"][:8]:
        operations.add_row(
            op["name"], op["category"], ms_text(op["ms"]), f"{op['share']:.0%}", f"{op['calls_per_task']:.1f}"
        )

    whatif = Table(title="What if", title_justify="left", box=None)
    whatif.add_column("scenario", no_wrap=True, overflow="ellipsis", max_width=max(16, width - 54))
    whatif.add_column("p50", justify="right", no_wrap=True)
    whatif.add_column("p95", justify="right", no_wrap=True)
    whatif.add_column("p95 change", justify="right", no_wrap=True)
    whatif.add_column("p95 range", justify="right", style="dim", no_wrap=True)
    for row in report["whatif"]:
        low, high = row["p95_ms_range"]
        whatif.add_row(
            row["scenario"] + _load(row),
            ms_text(row["p50_ms"]),
            ms_text(row["p95_ms"]),
            f"{row['p95_change']:+.1%}".replace("-", "−"),
            f"{ms_text(low)} – {ms_text(high)}" if not math.isclose(low, high) else "",
        )
    serial = report["serial_llm_calls"]
    notes = Text(
        f"Serial LLM calls on the critical path: mean {serial['mean']:.1f}, p95 {serial['p95']}.  "
        f"Inference time with a measured prefill/decode split: {report['inference_split_measured']:.0%}.",
        style="dim",
    )
    verdict = Panel(Text(report["verdict"], style="bold"), title="verdict", title_align="left")
    return Group(head, Text(), budget, Text(), operations, Text(), whatif, Text(), notes, verdict)


def print_blame(report: Mapping[str, Any], console: Console) -> None:
    console.print(blame_renderable(report, console.width))


_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def md_row(cells: Iterable[str]) -> str:
    """A Markdown table row. Names come from traces: a pipe in one is escaped and a line break becomes a
    space, so no name splits its row."""
    return "| " + " | ".join(_LINE_BREAKS.sub(" ", cell).replace("|", r"\|") for cell in cells) + " |"


def blame_markdown_tables(report: Mapping[str, Any]) -> list[str]:
    """The latency budget and what-if tables, for any document that embeds blame's numbers."""
    p = report["percentile"]
    lines = [
        f"### What a p{p:g} task is made of",
        "",
        md_row(["category", "ms", "share", "components"]),
        md_row(["---", "---:", "---:", "---"]),
    ]
    for row in report["budget"]:
        lines.append(md_row([row["category"], f"{row['ms']:.1f}", f"{row['share']:.1%}", _components(row)]))
    lines += [
        "",
        "### What if",
        "",
        md_row(["scenario", "speedups", "p50 ms", "p95 ms", "p95 change", "p95 range ms"]),
        md_row(["---", "---", "---:", "---:", "---:", "---"]),
    ]
    for row in report["whatif"]:
        low, high = row["p95_ms_range"]
        lines.append(
            md_row(
                [
                    row["scenario"],
                    _speedups(row["speedups"])
                    if "speedups" in row
                    else f"profile {row['target']}{_load(row)}",
                    f"{row['p50_ms']:.1f}",
                    f"{row['p95_ms']:.1f}",
                    f"{row['p95_change']:+.1%}",
                    f"{low:.1f} – {high:.1f}",
                ]
            )
        )
    lines.append("")
    return lines


def blame_markdown(report: Mapping[str, Any]) -> str:
    """The blame report as a markdown section, same numbers as the JSON."""
    latency = report["latency_ms"]
    tasks = report["tasks"]
    lines = [
        f"## Latency blame: {', '.join(tasks['names'])}",
        "",
        f"**{report['verdict']}**",
        "",
        f"{tasks['count']} tasks ({tasks['accepted']} accepted). "
        f"p50 {ms_text(latency['p50'])}, p90 {ms_text(latency['p90'])}, p95 {ms_text(latency['p95'])}, "
        f"p99 {ms_text(latency['p99'])}, mean {ms_text(latency['mean'])}, max {ms_text(latency['max'])}.",
        "",
    ]
    lines += blame_markdown_tables(report)
    lines += [
        "### Top operations on the critical path",
        "",
        md_row(["operation", "category", "ms", "share", "calls/task"]),
        md_row(["---", "---", "---:", "---:", "---:"]),
    ]
    for op in report["operations"]:
        lines.append(
            md_row(
                [
                    op["name"],
                    op["category"],
                    f"{op['ms']:.1f}",
                    f"{op['share']:.1%}",
                    f"{op['calls_per_task']:.2f}",
                ]
            )
        )
    serial = report["serial_llm_calls"]
    lines += [
        "",
        f"Serial LLM calls on the critical path: mean {serial['mean']:.2f}, p95 {serial['p95']}. "
        f"Share of inference time with a measured prefill/decode split: "
        f"{report['inference_split_measured']:.1%}.",
        "",
    ]
    return "\n".join(lines)


def probe_table(profile: CandidateProfile, calls: Sequence[ProbeCall]) -> Group:
    """A fitted profile, figure by figure, and how well it predicts the probe's own calls."""
    table = Table(title=f"profile {profile.name} (measured)", title_justify="left", box=None)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, figure in profile.figures.items():
        table.add_row(name, f"{figure.value:,.{3 if figure.value < 1 else 1}f} {UNITS.get(name, 'ms')}")
    residuals = sorted(abs(r) for r in profile.residuals_ms)
    mean_total = sum(c.total_ms for c in calls) / len(calls)
    p95 = residuals[min(len(residuals) - 1, math.ceil(0.95 * len(residuals)) - 1)]
    notes = Text(
        f"{len(calls)} calls at {profile.concurrency or 1} at a time, mean {ms_text(mean_total)}; "
        f"prediction error: median {ms_text(residuals[len(residuals) // 2])}, p95 {ms_text(p95)}",
        style="dim",
    )
    bands = Table(title="measured − predicted, by prompt size", title_justify="left", box=None)
    for column in ("input tokens", "calls", "median", "share"):
        bands.add_column(column, justify="right")
    for band in residual_bands(calls, profile.residuals_ms):
        low, high = band.inputs
        bands.add_row(
            f"{low:,}–{high:,}", str(band.calls), f"{band.median_ms:+,.1f} ms", f"{band.median_share:+.1%}"
        )
    return Group(table, notes, bands)
