"""Budget a whole store: one analysis pass gives blame's what-if rows and the speedup curve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentscope.analysis import report
from agentscope.analysis.pipeline import task_results
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.report import nearest_rank
from agentscope.analysis.whatif import Scenario
from agentscope.budget import report as budget_report
from agentscope.budget.catalog import Catalog
from agentscope.store.store import Store


def budget_store(
    store: Store,
    catalog: Catalog,
    tasks_per_month: float,
    *,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    headline: Scenario | None = None,
    percentile: float = 95,
    model_map: Mapping[str, str] | None = None,
    task_name: str | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
) -> dict[str, Any] | None:
    """The ``agentscope.budget/v1`` document for the store, or None when it holds no task."""
    curve = budget_report.curve_scenarios()
    results = task_results(
        store, report.variants([*scenarios, *curve]), task_name, repair=repair, targets=targets
    )
    if not results:
        return None
    blame = report.blame(results, scenarios, percentile, headline, targets)
    offset = 2 * len(scenarios)
    points = []
    for k, scenario in enumerate(curve):
        optimistic = sorted(r.whatif_ns[offset + 2 * k] for r in results)
        pessimistic = sorted(r.whatif_ns[offset + 2 * k + 1] for r in results)
        points.append(
            (
                scenario.speedups["inference"],
                nearest_rank(optimistic, 95) / 1e6,
                nearest_rank(pessimistic, 95) / 1e6,
            )
        )
    return budget_report.build(
        results,
        blame,
        catalog,
        tasks_per_month,
        model_map=model_map,
        curve=points,
        traces=store.trace_count(),
        targets=targets,
    )
