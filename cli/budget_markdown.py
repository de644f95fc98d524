"""The budget as a markdown document a procurement reader can paste and read on its own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agentscope.cli.render import blame_markdown_tables, md_row, ms_text


def money(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"${value:,.2f}"
    if abs(value) >= 0.01:
        return f"${value:,.2f}"
    return f"${value:.6f}"


def count(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "—"
    if value >= 1e9:
        return f"{value / 1e9:,.3f} billion"
    if value >= 1e6:
        return f"{value / 1e6:,.2f} million"
    return f"{value:,.0f}"


def budget_markdown(doc: Mapping[str, Any]) -> str:
    scope, latency, usage, projection = doc["scope"], doc["latency"], doc["usage"], doc["projection"]
    names = ", ".join(scope["task_names"])
    lines = [
        f"# Inference budget: {names}",
        "",
        f"Scope: {scope['tasks']:,} tasks ({scope['accepted']:,} accepted, {scope['accepted_rate']:.0%}) in "
        f"{scope['traces']:,} traces, recorded {scope['period']['start']} to {scope['period']['end']}. "
        f"Projected to {projection['tasks_per_month']:,.0f} tasks a month.",
        "",
        "## Would faster inference help?",
        "",
        f"**{latency['verdict']}**",
        "",
    ]
    lines += blame_markdown_tables(latency)
    per_task, per_accepted = usage["per_task"], usage["per_accepted_task"]
    lines += [
        *_decision(doc),
        "## Tokens",
        "",
        md_row(["", "per task", "per accepted task", "per month"]),
        md_row(["---", "---:", "---:", "---:"]),
    ]
    monthly = projection["monthly_tokens"]
    for key, label, month_key in (
        ("input_tokens", "input tokens", "input"),
        ("output_tokens", "output tokens", "output"),
        ("cached_tokens", "cached input tokens", "cached"),
    ):
        lines.append(
            md_row([label, f"{per_task[key]:,.0f}", _maybe(per_accepted[key]), count(monthly[month_key])])
        )
    lines.append(
        md_row(
            [
                "LLM calls",
                f"{per_task['llm_calls']:,.1f}",
                _maybe(per_accepted["llm_calls"]),
                count(per_task["llm_calls"] * projection["tasks_per_month"]),
            ]
        )
    )
    lines += [
        "",
        f"On average that is {projection['tokens_per_second']:,.0f} tokens/s "
        f"({projection['tokens_per_minute']:,.0f} tokens/min) and {projection['llm_calls_per_minute']:,.1f} "
        "LLM calls/min, around the clock.",
        "",
    ]
    if usage["unpriced_models"]:
        lines += [
            f"No catalog price matches {', '.join(usage['unpriced_models'])}; price them as a candidate "
            "model with `--model-map TRACED=CANDIDATE`.",
            "",
        ]
    lines += [
        "## Monthly cost",
        "",
        md_row(["option", "kind", "what", "per month", "per task", "per accepted task"]),
        md_row(["---", "---", "---", "---:", "---:", "---:"]),
    ]
    for option in sorted(doc["options"], key=lambda o: o["monthly_cost"]):
        lines.append(
            md_row(
                [
                    option["name"],
                    "per token" if option["kind"] == "per_token" else "fixed",
                    option["what"],
                    money(option["monthly_cost"]),
                    money(option["cost_per_task"]),
                    money(option["cost_per_accepted_task"]),
                ]
            )
        )
    if doc["break_even"]:
        lines += [
            "",
            "## Break-even: per-token API against renting capacity",
            "",
            "The monthly token volume at which the per-token option costs as much as the fixed option "
            "running all month (at the traced input/output mix).",
            "",
            md_row(
                [
                    "per-token",
                    "fixed",
                    "blended $/M",
                    "tokens/month",
                    "tokens/s",
                    "tokens/min",
                    "tasks/month",
                    "of TPM limit",
                ]
            ),
            md_row(["---", "---", "---:", "---:", "---:", "---:", "---:", "---:"]),
        ]
        for row in doc["break_even"]:
            share = row.get("share_of_tokens_per_minute_limit")
            lines.append(
                md_row(
                    [
                        row["per_token"],
                        row["fixed"],
                        f"${row['blended_per_million']:.3f}",
                        count(row["monthly_tokens"]),
                        f"{row['tokens_per_second']:,.0f}",
                        f"{row['tokens_per_minute']:,.0f}",
                        count(row["tasks_per_month"]),
                        f"{share:.1%}" if share is not None else "—",
                    ]
                )
            )
    if doc["rate_limits"]:
        lines += ["", "## Rate-limit headroom (averages; peaks are higher)", ""]
        lines += [
            md_row(["option", "tier", "limit", "allowed", "average use", "share"]),
            md_row(["---", "---", "---", "---:", "---:", "---:"]),
        ]
        for row in doc["rate_limits"]:
            lines.append(
                md_row(
                    [
                        row["option"],
                        str(row.get("tier") or "—"),
                        row["limit"].replace("_", " "),
                        f"{row['limit_value']:,.0f}",
                        f"{row['average_use']:,.1f}",
                        f"{row['share']:.1%}",
                    ]
                )
            )
    for section in doc.get("task_types", []):
        lines += ["", *_task_type(section)]
    lines += ["", "## Assumptions", ""] + [f"- {a}" for a in doc["assumptions"]]
    lines += ["", "## Sources", ""] + [f"- {s}" for s in doc["sources"]]
    lines += ["", "## Method", "", " ".join(doc["method"]), ""]
    return "\n".join(lines)


def _task_type(section: Mapping[str, Any]) -> list[str]:
    """One task type's budget as a part of the whole: its own document, one heading level down,
    without the assumptions, sources and method that the whole already states."""
    own = budget_markdown(section).split("\n## Assumptions", 1)[0].splitlines()
    name = ", ".join(section["scope"]["task_names"])
    own[0] = f"## Task type: {name}"
    return [("#" + line if line.startswith("#") and i > 0 else line) for i, line in enumerate(own)]


DECISION_HEADER = [
    "option",
    "p50",
    "p95",
    "p95 change",
    "cost per accepted task",
    "priced as",
    "break-even",
    "measured at",
]


def decision_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """The candidates side by side (``budget --target``): predicted latency beside cost, as table cells."""
    rows = []
    for row in doc.get("decision", []):
        even = (
            f"{count(row['break_even_tasks_per_month'])} tasks/month vs {row['break_even_against']}"
            if row["break_even_tasks_per_month"] is not None
            else "—"
        )
        rows.append(
            [
                row["option"],
                f"{row['p50_ms'] / 1000:.2f} s",
                f"{row['p95_ms'] / 1000:.2f} s",
                f"{row['p95_change']:+.0%}".replace("-", "−"),
                money(row["cost_per_accepted_task"]),
                row["priced_as"] or "—",
                even,
                f"{row['concurrency']} at once" if row.get("concurrency") else "—",
            ]
        )
    return rows


def _decision(doc: Mapping[str, Any]) -> list[str]:
    if "decision" not in doc:
        return []
    lines = [
        "## The options side by side",
        "",
        md_row(DECISION_HEADER),
        md_row(["---", *["---:"] * 4, "---", "---", "---"]),
    ]
    return [*lines, *(md_row(cells) for cells in decision_rows(doc)), ""]


def _maybe(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


__all__ = ["budget_markdown", "count", "money", "ms_text"]
