"""``agentscope compare`` for people: a terminal page and a markdown section of the same numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentscope.cli.render import CATEGORY_COLORS, md_row, ms_text
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def _change(row: Mapping[str, Any]) -> str:
    ms = row["change_ms"]
    signed = ("+" if ms >= 0 else "−") + ms_text(abs(ms))
    if row["change"] is None:
        return signed
    return f"{signed} ({row['change']:+.0%})".replace("(-", "(−")


def _change_text(row: Mapping[str, Any]) -> Text:
    style = "green" if row["change_ms"] < -0.5 else "red" if row["change_ms"] > 0.5 else "dim"
    return Text(_change(row), style=style)


def _sides(doc: Mapping[str, Any]) -> list[str]:
    return [
        f"{role} {side['label']}: {side['tasks']:,} tasks "
        f"({side['accepted']:,} accepted; {', '.join(side['names'])})"
        for role, side in (("baseline", doc["baseline"]), ("candidate", doc["candidate"]))
    ]


def compare_renderable(doc: Mapping[str, Any]) -> Group:
    head = Text("\n".join(_sides(doc)))
    latency = Table(title="Latency", title_justify="left", box=None, pad_edge=False)
    for column, justify in (("", "left"), ("baseline", "right"), ("candidate", "right"), ("change", "right")):
        latency.add_column(column, justify=justify, no_wrap=True)
    for key, row in doc["latency_ms"].items():
        latency.add_row(key, ms_text(row["baseline_ms"]), ms_text(row["candidate_ms"]), _change_text(row))
    budget = Table(
        title=f"What a p{doc['percentile']:g} task is made of", title_justify="left", box=None, pad_edge=False
    )
    for column, justify in (
        ("category", "left"),
        ("baseline", "right"),
        ("candidate", "right"),
        ("change", "right"),
    ):
        budget.add_column(column, justify=justify, no_wrap=True)
    for row in doc["budget"]:
        budget.add_row(
            Text(row["category"], style=CATEGORY_COLORS[row["category"]]),
            ms_text(row["baseline_ms"]),
            ms_text(row["candidate_ms"]),
            _change_text(row),
        )
    operations = Table(title="Operations that changed most", title_justify="left", box=None, pad_edge=False)
    operations.add_column("operation", overflow="ellipsis", no_wrap=True, max_width=40)
    operations.add_column("category", no_wrap=True)
    for column in ("baseline", "candidate", "change"):
        operations.add_column(column, justify="right", no_wrap=True)
    for op in doc["operations"]:
        operations.add_row(
            op["name"],
            op["category"],
            ms_text(op["baseline_ms"]),
            ms_text(op["candidate_ms"]),
            _change_text(op),
        )
    verdict = Panel(Text(doc["summary"], style="bold"), title="summary", title_align="left")
    return Group(head, Text(), latency, Text(), budget, Text(), operations, verdict)


def print_compare(doc: Mapping[str, Any], console: Console) -> None:
    console.print(compare_renderable(doc))


def compare_markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"## Comparison: {doc['baseline']['label']} → {doc['candidate']['label']}", ""]
    lines += [f"**{doc['summary']}**", ""]
    lines += [f"- {side}" for side in _sides(doc)]
    lines += [
        "",
        md_row(["", "baseline ms", "candidate ms", "change"]),
        md_row(["---", "---:", "---:", "---:"]),
    ]
    for key, row in doc["latency_ms"].items():
        lines.append(md_row([key, f"{row['baseline_ms']:.1f}", f"{row['candidate_ms']:.1f}", _change(row)]))
    lines += ["", f"### What a p{doc['percentile']:g} task is made of", ""]
    lines += [
        md_row(["category", "baseline ms", "candidate ms", "change"]),
        md_row(["---", "---:", "---:", "---:"]),
    ]
    for row in doc["budget"]:
        cells = [row["category"], f"{row['baseline_ms']:.1f}", f"{row['candidate_ms']:.1f}", _change(row)]
        lines.append(md_row(cells))
    lines += ["", "### Operations that changed most", ""]
    lines += [
        md_row(["operation", "category", "baseline ms", "candidate ms", "change"]),
        md_row(["---", "---", "---:", "---:", "---:"]),
    ]
    for op in doc["operations"]:
        cells = [
            op["name"],
            op["category"],
            f"{op['baseline_ms']:.1f}",
            f"{op['candidate_ms']:.1f}",
            _change(op),
        ]
        lines.append(md_row(cells))
    lines.append("")
    return "\n".join(lines)
