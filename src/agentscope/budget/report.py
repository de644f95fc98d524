"""The ``agentscope.budget/v1`` document: latency from blame, usage and cost from the traces.

``build`` is pure: task results and a catalog in, the document out.  Rendering
(markdown, HTML) lives in the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.report import nearest_rank
from agentscope.analysis.tasks import TaskResult
from agentscope.budget import costs
from agentscope.budget.catalog import HOURS_PER_MONTH, Catalog, PerTokenOption

SCHEMA = "agentscope.budget/v1"

METHOD = (
    "Each task's critical path — the chain of spans its end waited on — was cut into eight categories "
    "(inference, queue, network, tool, db, retry, cpu, other) from the traces' own timings.",
    "The latency budget averages the tasks ranked around the percentile and scales them to that "
    "percentile's duration.",
    "What-if rows re-simulate every trace with the named categories sped up, keeping the order in which "
    "steps waited for each other, and recompute the percentiles.",
    "Token volumes are the averages per traced task, projected to the stated number of tasks per month, "
    "and priced at the catalog's list prices; a month is 730 hours.",
    "A break-even volume is the monthly token count at which a per-token option costs as much as renting "
    "a fixed option all month; whether that hardware could serve the volume is not modelled.",
)


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds")


def curve_rows(curve: Sequence[tuple[float, float, float]]) -> list[dict[str, Any]]:
    """The what-if curve as the document gives it: one row per inference speedup."""
    return [
        {"inference_speedup": "inf" if math.isinf(f) else f, "p95_ms": opt, "p95_ms_pessimistic": pes}
        for f, opt, pes in curve
    ]


DURATIONS_SHOWN = 5000
"""Task durations a document lists at most (every k-th of more), for a histogram."""


def distribution(durations: Sequence[float]) -> dict[str, Any]:
    """Percentiles of ascending task ``durations`` (ms), and the durations themselves, thinned."""
    n = len(durations)
    return {
        "p10": nearest_rank(durations, 10),
        "p25": nearest_rank(durations, 25),
        "p50": nearest_rank(durations, 50),
        "p75": nearest_rank(durations, 75),
        "p90": nearest_rank(durations, 90),
        "p99": nearest_rank(durations, 99),
        "durations": list(durations)
        if n <= DURATIONS_SHOWN
        else list(durations[:: math.ceil(n / DURATIONS_SHOWN)]),
    }


def _usage(results: Sequence[TaskResult], accepted: int) -> dict[str, Any]:
    n = len(results)
    totals = {
        "input_tokens": sum(r.input_tokens for r in results),
        "output_tokens": sum(r.output_tokens for r in results),
        "cached_tokens": sum(r.cached_tokens for r in results),
        "llm_calls": sum(r.llm_calls for r in results),
    }
    return {
        "per_task": {key: value / n for key, value in totals.items()},
        "per_accepted_task": {key: (value / accepted if accepted else None) for key, value in totals.items()},
    }


def _models(results: Sequence[TaskResult], model_map: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    n = len(results)
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        for model, (inputs, outputs, cached, calls) in r.models.items():
            row = out.setdefault(
                model,
                {
                    "model": model,
                    "priced_as": model_map.get(model, model),
                    "input": 0,
                    "output": 0,
                    "cached": 0,
                    "calls": 0,
                },
            )
            row["input"] += inputs
            row["output"] += outputs
            row["cached"] += cached
            row["calls"] += calls
    return {
        model: {
            "model": row["model"],
            "priced_as": row["priced_as"],
            "input_tokens_per_task": row["input"] / n,
            "output_tokens_per_task": row["output"] / n,
            "cached_tokens_per_task": row["cached"] / n,
            "calls_per_task": row["calls"] / n,
        }
        for model, row in out.items()
    }


def build(
    results: Sequence[TaskResult],
    blame: Mapping[str, Any],
    catalog: Catalog,
    tasks_per_month: float,
    *,
    model_map: Mapping[str, str] | None = None,
    curve: Sequence[tuple[float, float, float]] = (),
    traces: int | None = None,
    targets: Sequence[CandidateProfile] = (),
) -> dict[str, Any]:
    """The budget document.  ``curve`` is (inference speedup, p95 ms optimistic, p95 ms pessimistic);
    with ``targets`` (whose rows ``blame`` carries), a decision table of the candidates."""
    model_map = dict(model_map or {})
    n = len(results)
    accepted = sum(1 for r in results if r.accepted)
    accepted_share = accepted / n
    accepted_month = tasks_per_month * accepted_share
    models = _models(results, model_map)

    options: list[dict[str, Any]] = []
    break_even: list[dict[str, Any]] = []
    rate_limits: list[dict[str, Any]] = []
    unpriced = sorted(m for m, row in models.items() if not catalog.for_model(row["priced_as"]))
    for option in catalog.per_token:
        covered = [row for row in models.values() if row["priced_as"] == option.model]
        if not covered:
            continue
        per_task = {
            "input": sum(row["input_tokens_per_task"] for row in covered),
            "output": sum(row["output_tokens_per_task"] for row in covered),
            "cached": sum(row["cached_tokens_per_task"] for row in covered),
            "calls": sum(row["calls_per_task"] for row in covered),
        }
        monthly_tokens = (per_task["input"] + per_task["output"]) * tasks_per_month
        cost_task = option.cost(per_task["input"], per_task["output"], per_task["cached"])
        options.append(
            _option_row(option, cost_task, tasks_per_month, accepted_share, [r["model"] for r in covered])
            | {"monthly_tokens": monthly_tokens}
        )
        input_share = per_task["input"] / (per_task["input"] + per_task["output"]) if monthly_tokens else 0.0
        tokens_per_task = per_task["input"] + per_task["output"]
        for fixed in catalog.fixed:
            volume = costs.break_even_tokens(option, fixed, input_share)
            if not math.isfinite(volume):
                continue  # a free per-token option never breaks even
            break_even.append(
                {
                    "per_token": option.name,
                    "fixed": fixed.name,
                    "blended_per_million": option.blended_per_million(input_share),
                    "monthly_tokens": volume,
                    "tokens_per_second": costs.per_second(volume),
                    "tokens_per_minute": costs.per_minute(volume),
                    "tasks_per_month": volume / tokens_per_task if tokens_per_task else None,
                    "above_projection": volume > monthly_tokens,
                }
            )
            for row in costs.headroom(option, volume, 0.0):
                if row["limit"] == "tokens_per_minute":
                    break_even[-1]["share_of_tokens_per_minute_limit"] = row["share"]
        rate_limits += costs.headroom(option, monthly_tokens, per_task["calls"] * tasks_per_month)
    for fixed in catalog.fixed:
        options.append(
            {
                "name": fixed.name,
                "kind": "fixed",
                "provider": fixed.provider,
                "what": f"{fixed.count} × {fixed.unit} at ${fixed.per_hour:.2f}/hour",
                "monthly_cost": fixed.monthly_cost,
                "cost_per_task": fixed.monthly_cost / tasks_per_month if tasks_per_month else None,
                "cost_per_accepted_task": fixed.monthly_cost / accepted_month if accepted_month else None,
                "source": fixed.source,
            }
        )

    usage = _usage(results, accepted)
    decision = _decision(blame, catalog, targets, usage["per_task"], accepted_share, options, unpriced)
    tokens_task = usage["per_task"]["input_tokens"] + usage["per_task"]["output_tokens"]
    monthly = tokens_task * tasks_per_month
    starts = [r.start_ns for r in results]
    ends = [r.start_ns + r.duration_ns for r in results]
    durations = sorted(r.duration_ns / 1e6 for r in results)
    document = {
        "schema": SCHEMA,
        "scope": {
            "tasks": n,
            "accepted": accepted,
            "accepted_rate": accepted / n,
            "traces": traces if traces is not None else len({r.trace_id for r in results}),
            "task_names": sorted({r.name for r in results}),
            "period": {"start": _iso(min(starts)), "end": _iso(max(ends))},
        },
        "latency": {
            "percentile": blame["percentile"],
            "latency_ms": blame["latency_ms"],
            "budget": blame["budget"],
            "whatif": blame["whatif"],
            "verdict": blame["verdict"],
            "curve": curve_rows(curve),
            "distribution_ms": distribution(durations),
        },
        "usage": usage | {"models": list(models.values()), "unpriced_models": unpriced},
        "projection": {
            "tasks_per_month": tasks_per_month,
            "accepted_tasks_per_month": accepted_month,
            "monthly_tokens": {
                "input": usage["per_task"]["input_tokens"] * tasks_per_month,
                "output": usage["per_task"]["output_tokens"] * tasks_per_month,
                "cached": usage["per_task"]["cached_tokens"] * tasks_per_month,
                "total": monthly,
            },
            "tokens_per_second": costs.per_second(monthly),
            "tokens_per_minute": costs.per_minute(monthly),
            "llm_calls_per_minute": costs.per_minute(usage["per_task"]["llm_calls"] * tasks_per_month),
            "hours_per_month": HOURS_PER_MONTH,
        },
        "options": options,
        "break_even": break_even,
        "rate_limits": rate_limits,
        "assumptions": [
            f"A month is {HOURS_PER_MONTH:g} hours; volumes are averages, and peaks are higher.",
            f"{tasks_per_month:,.0f} tasks a month, with the traced mix of accepted and rejected tasks "
            f"({accepted / n:.0%} accepted); rejected tasks cost tokens too.",
            "Per-token options price the traced input/output mix; cached input is billed at its own price "
            "only where the catalog lists one.",
            "Fixed options cost their hourly price for every hour of the month, busy or not; their capacity "
            "is not modelled.",
            f"Prices: {catalog.origin}.",
        ],
        "sources": sorted(
            {option.source for option in (*catalog.per_token, *catalog.fixed) if option.source}
        ),
        "method": list(METHOD),
    }
    if targets:
        document["decision"] = decision
    return document


def _decision(
    blame: Mapping[str, Any],
    catalog: Catalog,
    targets: Sequence[CandidateProfile],
    per_task: Mapping[str, float],
    accepted_share: float,
    options: Sequence[Mapping[str, Any]],
    unpriced: Sequence[str],
) -> list[dict[str, Any]]:
    """Per option — as traced (each model at its cheapest list price), then each target — the
    predicted p50/p95 beside the cost per accepted task.

    A target is priced at the catalog's per-token option of the same name (else of its model), with
    all the traced tokens moved to it; its break-even is the monthly task volume above which renting
    the cheapest fixed option would cost less.
    """
    cheapest: dict[tuple[str, ...], float] = {}  # traced models → the cheapest option pricing them
    for o in options:
        if o["kind"] == "per_token" and o["cost_per_accepted_task"] is not None:
            key = tuple(o["prices_models"])
            cheapest[key] = min(cheapest.get(key, math.inf), o["cost_per_accepted_task"])
    rows: list[dict[str, Any]] = [
        {
            "option": "as traced",
            "p50_ms": blame["latency_ms"]["p50"],
            "p95_ms": blame["latency_ms"]["p95"],
            "p95_change": 0.0,
            "cost_per_accepted_task": sum(cheapest.values()) if cheapest and not unpriced else None,
            "priced_as": None,
            "break_even_tasks_per_month": None,
            "break_even_against": None,
            "concurrency": None,
        }
    ]
    by_target = {row["target"]: row for row in blame["whatif"] if "target" in row}
    inputs, outputs, cached = per_task["input_tokens"], per_task["output_tokens"], per_task["cached_tokens"]
    tokens_task = inputs + outputs
    for target in targets:
        predicted = by_target[target.name]
        option = next((o for o in catalog.per_token if o.name == target.name), None) or next(
            (o for o in catalog.per_token if target.model and o.model == target.model), None
        )
        cost_task = option.cost(inputs, outputs, cached) if option else None
        even = None
        if option is not None and tokens_task > 0:
            share = inputs / tokens_task
            volumes = [(costs.break_even_tokens(option, fixed, share), fixed.name) for fixed in catalog.fixed]
            volumes = [(v, name) for v, name in volumes if math.isfinite(v)]
            even = min(volumes) if volumes else None
        rows.append(
            {
                "option": target.name,
                "p50_ms": predicted["p50_ms"],
                "p95_ms": predicted["p95_ms"],
                "p95_change": predicted["p95_change"],
                "cost_per_accepted_task": (
                    cost_task / accepted_share if cost_task is not None and accepted_share else None
                ),
                "priced_as": option.name if option else None,
                "break_even_tasks_per_month": even[0] / tokens_task if even else None,
                "break_even_against": even[1] if even else None,
                "concurrency": target.concurrency,
            }
        )
    return rows


def _option_row(
    option: PerTokenOption, cost_task: float, tasks_per_month: float, accepted_share: float, models: list[str]
) -> dict[str, Any]:
    """A per-token option's row; its cost per accepted task does not depend on the monthly volume."""
    monthly = cost_task * tasks_per_month
    return {
        "name": option.name,
        "kind": "per_token",
        "provider": option.provider,
        "what": (
            f"{option.model} at ${option.input_per_million:g}/M input, "
            f"${option.output_per_million:g}/M output"
        ),
        "prices_models": models,
        "monthly_cost": monthly,
        "cost_per_task": cost_task,
        "cost_per_accepted_task": cost_task / accepted_share if accepted_share else None,
        "source": option.source,
    }
