"""Two blame reports side by side: what changed between a baseline and a candidate (``agentscope compare``).

The use is a provider trial: the same agent before and after a switch, as two
stores or two time windows of one.  ``compare`` is a pure function of the two
``agentscope.blame/v1`` documents, so it compares reports from either engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA = "agentscope.compare/v1"
LATENCY_KEYS = ("p50", "p90", "p95", "p99", "mean")
TOP_CHANGES = 10
SUMMARY_CATEGORIES = 2


def _side(label: str, report: Mapping[str, Any]) -> dict[str, Any]:
    tasks = report["tasks"]
    return {"label": label, "tasks": tasks["count"], "accepted": tasks["accepted"], "names": tasks["names"]}


def _row(baseline: float, candidate: float) -> dict[str, float | None]:
    return {
        "baseline_ms": baseline,
        "candidate_ms": candidate,
        "change_ms": candidate - baseline,
        "change": (candidate - baseline) / baseline if baseline > 0 else None,
    }


def _signed(ms: float) -> str:
    sign = "+" if ms >= 0 else "−"
    size = abs(ms)
    return f"{sign}{size / 1000:.1f} s" if size >= 1000 else f"{sign}{size:.0f} ms"


def summary(percentile: float, latency: Mapping[str, Any], budget: list[dict[str, Any]]) -> str:
    """One sentence: ``p95 −31%: inference −1.2 s, queue +0.3 s``."""
    key = f"p{percentile:g}"
    row = latency[key]
    change = row["change"]
    head = (
        f"{key} {change:+.0%}".replace("-", "−")
        if change is not None
        else f"{key} {_signed(row['change_ms'])}"
    )
    moved = sorted(budget, key=lambda r: -abs(r["change_ms"]))[:SUMMARY_CATEGORIES]
    moved = [r for r in moved if abs(r["change_ms"]) >= 0.5]
    if not moved:
        return f"{head}: no category moved by more than 1 ms."
    return f"{head}: " + ", ".join(f"{r['category']} {_signed(r['change_ms'])}" for r in moved) + "."


def compare(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
) -> dict[str, Any]:
    """The ``agentscope.compare/v1`` document of two blame reports at the same percentile."""
    if baseline["percentile"] != candidate["percentile"]:
        raise ValueError("the two reports are at different percentiles")
    percentile = baseline["percentile"]
    latency = {
        key: _row(baseline["latency_ms"][key], candidate["latency_ms"][key])
        for key in LATENCY_KEYS
        if key in baseline["latency_ms"]
    }
    key = f"p{percentile:g}"
    if key not in latency:  # the budget at the percentile adds up to it
        latency[key] = _row(
            sum(r["ms"] for r in baseline["budget"]), sum(r["ms"] for r in candidate["budget"])
        )
    theirs = {row["category"]: row["ms"] for row in candidate["budget"]}
    budget = [
        {"category": row["category"], **_row(row["ms"], theirs[row["category"]])}
        for row in baseline["budget"]
    ]
    before = {op["name"]: op for op in baseline["operations"]}
    after = {op["name"]: op for op in candidate["operations"]}
    operations = [
        {
            "name": name,
            "category": (before.get(name) or after[name])["category"],
            **_row(
                before[name]["ms"] if name in before else 0.0, after[name]["ms"] if name in after else 0.0
            ),
        }
        for name in sorted(set(before) | set(after))
    ]
    operations.sort(key=lambda op: -abs(op["change_ms"]))
    return {
        "schema": SCHEMA,
        "percentile": percentile,
        "baseline": _side(baseline_label, baseline),
        "candidate": _side(candidate_label, candidate),
        "latency_ms": latency,
        "budget": budget,
        "operations": operations[:TOP_CHANGES],
        "summary": summary(percentile, latency, budget),
    }
