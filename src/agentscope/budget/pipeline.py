"""Budget a whole store: one analysis pass gives blame's what-if rows and the speedup curve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentscope.analysis import report
from agentscope.analysis.pipeline import task_results
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.tasks import TaskResult
from agentscope.analysis.whatif import Scenario
from agentscope.budget import report as budget_report
from agentscope.budget.catalog import Catalog
from agentscope.store.selection import Selection
from agentscope.store.shared import SharedStore
from agentscope.store.store import Store


def budget_store(
    store: Store | SharedStore,
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
    selection: Selection | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.budget/v1`` document for the store's selected tasks, or None when there is none.

    Tasks of different types cost and wait differently, so a store holding several
    task names gets, beside the total, one document per task type under
    ``task_types`` (each projected to its share of ``tasks_per_month``).
    """
    curve = report.curve_scenarios()
    results = task_results(
        store,
        report.variants([*scenarios, *curve]),
        task_name,
        repair=repair,
        targets=targets,
        selection=selection,
    )
    if not results:
        return None

    def document(subset: Sequence[TaskResult], monthly: float, traces: int | None) -> dict[str, Any]:
        blame = report.blame(subset, scenarios, percentile, headline, targets)
        points = _curve(subset, curve, offset=2 * len(scenarios))
        return budget_report.build(
            subset,
            blame,
            catalog,
            monthly,
            model_map=model_map,
            curve=points,
            traces=traces,
            targets=targets,
        )

    total = document(results, tasks_per_month, None if selection else store.trace_count())
    names = sorted({r.name for r in results})
    if len(names) > 1:
        total["task_types"] = []
        for name in names:
            subset = [r for r in results if r.name == name]
            total["task_types"].append(document(subset, tasks_per_month * len(subset) / len(results), None))
    return total


def _curve(
    results: Sequence[TaskResult], curve: Sequence[Scenario], offset: int
) -> list[tuple[float, float, float]]:
    """(inference speedup, p95 ms optimistic, p95 ms pessimistic) of each curve scenario."""
    whatifs = np.array([r.whatif_ns[offset:] for r in results], dtype=np.float64)
    return report.curve_points(whatifs.T, curve)
