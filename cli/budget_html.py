"""The budget as one self-contained HTML file with plotly charts (its JavaScript embedded).

Four charts: the p95 budget as a stacked bar, p95 against inference speedup with
the Amdahl limit, the distribution of task latency, and the monthly cost of each
option against tasks per month with the break-even points marked.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from agentscope.cli.budget_markdown import DECISION_HEADER, count, decision_rows, money

COLORS = {
    "inference": "#8e44ad",
    "queue": "#f1c40f",
    "network": "#17a2b8",
    "tool": "#27ae60",
    "db": "#2e86de",
    "retry": "#e74c3c",
    "cpu": "#7f8c8d",
    "other": "#bdc3c7",
}


def _budget_bar(latency: Mapping[str, Any]) -> go.Figure:
    figure = go.Figure()
    for row in latency["budget"]:
        figure.add_bar(
            name=row["category"],
            y=[f"p{latency['percentile']:g}"],
            x=[row["ms"]],
            orientation="h",
            marker_color=COLORS[row["category"]],
            hovertemplate=f"{row['category']}: %{{x:.1f}} ms<extra></extra>",
        )
    figure.update_layout(
        barmode="stack",
        title=f"What a p{latency['percentile']:g} task is made of (ms)",
        height=260,
        xaxis_title="ms",
    )
    return figure


def _curve(latency: Mapping[str, Any]) -> go.Figure:
    points = [p for p in latency["curve"] if p["inference_speedup"] != "inf"]
    limit = next((p for p in latency["curve"] if p["inference_speedup"] == "inf"), None)
    figure = go.Figure()
    xs = [p["inference_speedup"] for p in points]
    figure.add_scatter(x=xs, y=[p["p95_ms"] for p in points], mode="lines+markers", name="p95 (optimistic)")
    figure.add_scatter(
        x=xs,
        y=[p["p95_ms_pessimistic"] for p in points],
        mode="lines",
        name="p95 (pessimistic)",
        line={"dash": "dot"},
    )
    if limit is not None:
        figure.add_hline(
            y=limit["p95_ms"],
            line_dash="dash",
            line_color="#e74c3c",
            annotation_text=f"Amdahl limit (infinitely fast inference): {limit['p95_ms']:.0f} ms",
        )
    figure.update_layout(
        title="p95 against inference speedup",
        xaxis_title="inference speedup (×)",
        yaxis_title="p95 latency (ms)",
        height=380,
        yaxis_rangemode="tozero",
    )
    return figure


def _distribution(latency: Mapping[str, Any]) -> go.Figure:
    figure = go.Figure()
    figure.add_histogram(
        x=latency["distribution_ms"]["durations"], nbinsx=40, name="tasks", marker_color="#2e86de"
    )
    for key in ("p50", "p95"):
        figure.add_vline(x=latency["latency_ms"][key], line_dash="dash", annotation_text=key)
    figure.update_layout(
        title="Task latency distribution", xaxis_title="task duration (ms)", yaxis_title="tasks", height=320
    )
    return figure


def _costs(doc: Mapping[str, Any]) -> go.Figure:
    projection = doc["projection"]["tasks_per_month"]
    top = max(
        projection * 4,
        max(
            (b["tasks_per_month"] or 0)
            for b in doc["break_even"]
            if b["tasks_per_month"] and not math.isinf(b["tasks_per_month"])
        )
        if doc["break_even"]
        else 0,
    )
    top = min(top, projection * 1000) if projection else top
    xs = [top * k / 50 for k in range(51)]
    figure = go.Figure()
    for option in doc["options"]:
        if option["kind"] == "per_token":
            per_task = option["cost_per_task"]
            figure.add_scatter(x=xs, y=[per_task * x for x in xs], mode="lines", name=option["name"])
        else:
            figure.add_scatter(
                x=[0, top],
                y=[option["monthly_cost"]] * 2,
                mode="lines",
                name=option["name"],
                line={"dash": "dash"},
            )
    fixed_costs = {o["name"]: o["monthly_cost"] for o in doc["options"] if o["kind"] == "fixed"}
    marks = [b for b in doc["break_even"] if b["tasks_per_month"] and b["tasks_per_month"] <= top]
    if marks:
        figure.add_scatter(
            x=[b["tasks_per_month"] for b in marks],
            y=[fixed_costs[b["fixed"]] for b in marks],
            mode="markers",
            name="break-even",
            marker={"size": 10, "symbol": "x", "color": "black"},
            text=[f"{b['per_token']} = {b['fixed']}" for b in marks],
        )
    figure.add_vline(x=projection, line_dash="dot", annotation_text="projection")
    figure.update_layout(
        title="Monthly cost against tasks per month",
        xaxis_title="tasks per month",
        yaxis_title="US$ per month",
        height=420,
        yaxis_type="log",
    )
    return figure


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _task_type(section: Mapping[str, Any], k: int) -> str:
    """One task type's verdict, p95 budget bar and monthly cost, as a part of the whole page."""
    scope, latency = section["scope"], section["latency"]
    bar = pio.to_html(
        _budget_bar(latency), full_html=False, include_plotlyjs=False, div_id=f"type-{k}-budget"
    )
    cheapest = min(section["options"], key=lambda o: o["monthly_cost"], default=None)
    cost = (
        f"<p>Cheapest option: {html.escape(cheapest['name'])}, {money(cheapest['monthly_cost'])} a month "
        f"({money(cheapest['cost_per_accepted_task'])} per accepted task).</p>"
        if cheapest
        else ""
    )
    return f"""
<h2>Task type: {html.escape(", ".join(scope["task_names"]))}</h2>
<p>{scope["tasks"]:,} tasks ({scope["accepted_rate"]:.0%} accepted); projected to
{section["projection"]["tasks_per_month"]:,.0f} tasks a month.</p>
<p class="verdict">{html.escape(latency["verdict"])}</p>
{bar}
{cost}"""


def budget_html(doc: Mapping[str, Any]) -> str:
    """The whole document as one HTML page that needs no network to open."""
    scope, latency, projection = doc["scope"], doc["latency"], doc["projection"]
    charts = [_budget_bar(latency), _curve(latency), _distribution(latency), _costs(doc)]
    parts = [
        pio.to_html(
            chart,
            full_html=False,
            include_plotlyjs=(i == 0),
            div_id=f"chart-{i}",
            config={"displaylogo": False},
        )
        for i, chart in enumerate(charts)
    ]
    options = _table(
        ["option", "kind", "what", "per month", "per task", "per accepted task"],
        [
            [
                o["name"],
                o["kind"].replace("_", " "),
                o["what"],
                money(o["monthly_cost"]),
                money(o["cost_per_task"]),
                money(o["cost_per_accepted_task"]),
            ]
            for o in sorted(doc["options"], key=lambda o: o["monthly_cost"])
        ],
    )
    breakeven = _table(
        ["per-token", "fixed", "tokens/month", "tokens/s", "tasks/month"],
        [
            [
                b["per_token"],
                b["fixed"],
                count(b["monthly_tokens"]),
                f"{b['tokens_per_second']:,.0f}",
                count(b["tasks_per_month"]),
            ]
            for b in doc["break_even"]
        ],
    )
    decision = (
        f"<h2>The options side by side</h2>\n{_table(DECISION_HEADER, decision_rows(doc))}"
        if "decision" in doc
        else ""
    )
    title = f"Inference budget: {', '.join(scope['task_names'])}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }} td, th {{ border: 1px solid #ddd; padding: 4px 8px; }}
th {{ background: #f5f5f5; }} .verdict {{ font-size: 1.2em; font-weight: bold; padding: 1em;
background: #f8f4fc; border-left: 4px solid #8e44ad; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{scope["tasks"]:,} tasks ({scope["accepted_rate"]:.0%} accepted) in {scope["traces"]:,} traces,
{html.escape(scope["period"]["start"])} to {html.escape(scope["period"]["end"])};
projected to {projection["tasks_per_month"]:,.0f} tasks a month.</p>
<p class="verdict">{html.escape(latency["verdict"])}</p>
{decision}
<h2>Latency</h2>
{parts[0]}
{parts[1]}
{parts[2]}
<h2>Cost</h2>
<p>{count(projection["monthly_tokens"]["total"])} tokens a month,
{projection["tokens_per_second"]:,.0f} tokens/s on average.</p>
{options}
{parts[3]}
<h2>Break-even</h2>
{breakeven}
{"".join(_task_type(section, k) for k, section in enumerate(doc.get("task_types", [])))}
<h2>Assumptions and sources</h2>
<ul>{"".join(f"<li>{html.escape(a)}</li>" for a in doc["assumptions"] + doc["sources"])}</ul>
<h2>Method</h2>
<p>{html.escape(" ".join(doc["method"]))}</p>
</body></html>
"""
