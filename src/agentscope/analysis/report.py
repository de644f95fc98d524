"""Across tasks: percentiles, the budget at a percentile, what-if rows and the verdict (DESIGN §6, §8).

``blame`` turns the per-task results of ``analyze`` into the ``agentscope.blame/v1``
object: the only step that needs every task at once, on a table that is small
(one row per task) whatever the size of the traces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentscope.analysis import categories as C
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.tasks import TaskResult, TraceExplanation
from agentscope.analysis.whatif import Scenario
from agentscope.store.arrays import numbers, taken

SCHEMA = "agentscope.blame/v1"
DEFAULT_SCENARIOS = (
    Scenario("inference x1.7", {"inference": 1.7}),
    Scenario("inference x3.6", {"inference": 3.6}),
    Scenario("inference x∞", {"inference": math.inf}),
)
CURVE_FACTORS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, math.inf)
"""Inference speedups the budget's what-if curve is simulated at (∞ is the Amdahl limit)."""


def curve_scenarios() -> list[Scenario]:
    return [Scenario(f"inference x{f:g}", {"inference": f}) for f in CURVE_FACTORS]


def curve_points(
    whatifs: Sequence[np.ndarray], curve: Sequence[Scenario]
) -> list[tuple[float, float, float]]:
    """(inference speedup, p95 ms optimistic, p95 ms pessimistic) of each ``curve`` scenario, from the
    tasks' what-if durations (ns), a column a what-if (a matrix's ``.T``, or :func:`list_columns`): each
    scenario's optimistic then pessimistic."""
    points = []
    for k, scenario in enumerate(curve):
        optimistic, pessimistic = (_percentiles(whatifs[2 * k + side], (95,))[95] for side in (0, 1))
        points.append((scenario.speedups["inference"], optimistic / 1e6, pessimistic / 1e6))
    return points


ROW_SCENARIOS = (*DEFAULT_SCENARIOS, *curve_scenarios())
"""The scenarios whose what-if times the task table keeps for every task: blame's defaults and the
budget's curve.  Any other scenario is simulated on demand."""
WINDOW = 2.5
TOP_OPERATIONS = 20


def nearest_rank(sorted_values: Sequence[float], percentile: float) -> float:
    """The nearest-rank percentile of ascending ``sorted_values`` (at least the first value)."""
    return sorted_values[_rank_index(len(sorted_values), percentile)]


def _rank_index(count: int, percentile: float) -> int:
    """Where the nearest-rank percentile of ``count`` (at least one) ascending values is, 0-based."""
    return min(max(1, math.ceil(percentile / 100 * count)), count) - 1


def _percentiles(values: np.ndarray, percentiles: Iterable[float]) -> dict[float, Any]:
    """Percentile → :func:`nearest_rank` of the unsorted ``values``, each found by :func:`_nth`."""
    return {q: _nth(values, _rank_index(len(values), q)) for q in dict.fromkeys(percentiles)}


SELECT_SAMPLE = 4096
"""Values sampled by :func:`_nth` to bound where the one it looks for lies."""


def _nth(values: np.ndarray, k: int) -> Any:
    """The ``k``-th smallest of ``values`` (0-based), exactly, without partitioning all of them.

    A partition of 500,000 values takes about 5 ms, and the budget's curve needs 32 of them.  A sorted
    sample of the values bounds a band in which the ``k``-th smallest almost surely lies; counting
    the values below the band places it there for certain (values below ``low`` rank first, those
    from ``low`` to ``high`` next), and only the band is partitioned.  When the count says it is not
    there, all the values are."""
    n = len(values)
    if n <= 8 * SELECT_SAMPLE:
        return np.partition(values, k)[k].item()
    sample = np.sort(values[:: n // SELECT_SAMPLE])
    m = len(sample)
    guess, margin = k * m // n, 4 * math.isqrt(m)
    low = sample[guess - margin] if guess - margin >= 0 else None
    high = sample[guess + margin] if guess + margin < m else None
    inside = np.ones(n, dtype=bool) if high is None else values <= high
    below = 0
    if low is not None:
        below = int(np.count_nonzero(values < low))
        inside &= values >= low
    band = values[inside]
    if below <= k < below + len(band):
        return np.partition(band, k - below)[k - below].item()
    return np.partition(values, k)[k].item()


def variants(scenarios: Sequence[Scenario]) -> list[Mapping[str, float]]:
    """The speedup maps to simulate: for each scenario, optimistic then pessimistic."""
    out: list[Mapping[str, float]] = []
    for scenario in scenarios:
        out.append(scenario.speedups)
        out.append(scenario.pessimistic)
    return out


def _ms(ns: float) -> float:
    return ns / 1e6


def _category_rows(components: Sequence[float], total_ns: float) -> list[dict[str, Any]]:
    rows = []
    for category in C.CATEGORIES:
        parts = {name: _ms(components[C.KEY_INDEX[f"{category}.{name}"]]) for name in C.COMPONENTS[category]}
        ns = sum(components[C.KEY_INDEX[key]] for key in C.KEYS if C.category_of(key) == category)
        rows.append(
            {
                "category": category,
                "ms": _ms(ns),
                "share": ns / total_ns if total_ns > 0 else 0.0,
                "components": parts,
            }
        )
    return rows


def window_percentiles(percentile: float) -> tuple[float, float]:
    """The percentiles that bound the tasks averaged for the budget at ``percentile``."""
    return max(percentile - WINDOW, 0.0), min(percentile + WINDOW, 100.0)


def window_ranks(count: int, percentile: float) -> tuple[int, int]:
    """The first and last rank (1-based, fastest first) of the tasks in the budget's window."""
    low, high = window_percentiles(percentile)
    lo = max(1, math.ceil(low / 100 * count))
    return lo, max(lo, math.ceil(high / 100 * count))


REPORT_COLUMNS = (
    "trace_id",
    "span_id",
    "name",
    "duration_ns",
    "accepted",
    "components",
    "whatif_ns",
    "operations",
    "serial_llm_calls",
    "repaired",
    "calls_without_tokens",
)
"""The per-task table's columns :meth:`Population.of_table` reads: a reader of the store's reads no others."""
CURVE_COLUMNS = ("duration_ns", "whatif_ns")
"""The per-task table's columns the budget's curve reads (:func:`curve_points` and the durations)."""
LATENCY_PERCENTILES = (50, 90, 95, 99)
WHATIF_PERCENTILES = (50, 95)


@dataclass
class Window:
    """The tasks near the percentile, summed: what the budget scales to the percentile.  Its tasks are
    added in rank order, so a report is the same whichever way its tasks were read."""

    count: int
    components: list[float]
    """Each component's sum over the window's tasks (``categories.KEYS`` order)."""
    operations: dict[str, tuple[str, float, float]]
    """Operation label → (category, summed ns, summed calls), labels in order of first appearance."""

    @classmethod
    def of(cls, components: np.ndarray, operations: Iterable[Mapping[str, tuple[str, float, int]]]) -> Window:
        """From the window's tasks' components (a tasks × ``KEYS`` matrix) and operations, in rank order."""
        sums: dict[str, list[Any]] = {}
        for ops in operations:
            for label, (category, ns, calls) in ops.items():
                entry = sums.get(label)
                if entry is None:
                    sums[label] = [category, 0.0 + ns, 0.0 + calls]
                else:
                    entry[1] += ns
                    entry[2] += calls
        summed = _in_order(components).tolist() if len(components) else [0.0] * len(C.KEYS)
        return cls(len(components), summed, {label: tuple(entry) for label, entry in sums.items()})


@dataclass
class Population:
    """What the report needs of all tasks: counts, percentiles, means, sums, the tasks near the percentile.

    ``Population.of`` computes it exactly from every task.  An engine whose tasks
    are too many to collect builds one from its own aggregates instead and says
    how in ``approximate`` (it lands in the report under that key).
    """

    count: int
    accepted: int
    names: list[str]
    duration_ns: dict[float, float]
    """Percentile → task duration, for ``LATENCY_PERCENTILES`` and the report's percentile."""
    max_ns: float
    mean_ns: float
    mean_components: list[float]
    window: Window
    """The tasks whose durations rank within ``WINDOW`` points of the percentile, summed."""
    serial_mean: float
    serial_p95: float
    split_measured_ns: float
    unsplit_ns: float
    whatif_ns: list[dict[float, float]]
    """Per what-if time in ``TaskResult.whatif_ns``: percentile → new duration."""
    calls_without_tokens: int
    repaired: int
    approximate: dict[str, Any] | None = None

    @classmethod
    def of(cls, results: Sequence[TaskResult], percentile: float) -> Population:
        """Exactly, from every task; any order of ``results`` gives one report.

        Each field is read once into a column in the order given (a pass over the results in
        memory order; ranked, they are scattered) and aggregated with NumPy.
        """
        if not results:
            raise ValueError("no tasks to analyse")
        durations = np.array([r.duration_ns for r in results], dtype=np.int64)
        trace_ids = np.array([r.trace_id or "" for r in results])
        span_ids = np.array([r.span_id for r in results])
        return cls._ranked(
            percentile,
            durations,
            lambda rows: np.lexsort((span_ids[rows], trace_ids[rows], durations[rows])),
            np.array([r.components for r in results], dtype=np.float64),
            np.array([r.serial_llm_calls for r in results]),
            np.array([r.whatif_ns for r in results], dtype=np.float64).reshape(len(results), -1).T,
            accepted=sum(1 for r in results if r.accepted),
            names=sorted({r.name for r in results}),
            calls_without_tokens=sum(r.calls_without_tokens for r in results),
            repaired=sum(r.repaired for r in results),
            window_operations=lambda rows: [results[i].operations for i in rows.tolist()],
        )

    @classmethod
    def of_table(cls, table: pa.Table, percentile: float, picks: Sequence[int] | None = None) -> Population:
        """:meth:`of` from a per-task table (``analysis.rows``; its ``REPORT_COLUMNS`` suffice), column by
        column: only the window's operations are parsed, and only they need be read.  The same population
        as :meth:`of` of its rows, with only the what-if times at ``picks`` where given."""
        from agentscope.analysis.rows import operations_of

        if not table.num_rows:
            raise ValueError("no tasks to analyse")
        keys = [("duration_ns", "ascending"), ("trace_id", "ascending"), ("span_id", "ascending")]

        def rank(rows: np.ndarray) -> np.ndarray:
            ranked = pa.table({key: taken(table.column(key), rows) for key, _ in keys})
            return numbers(pc.sort_indices(ranked, sort_keys=keys)).astype(np.int64)

        return cls._ranked(
            percentile,
            numbers(table.column("duration_ns")),
            rank,
            list_matrix(table.column("components"), table.num_rows),
            numbers(table.column("serial_llm_calls")),
            list_columns(table.column("whatif_ns"), picks),
            accepted=int(pc.sum(table.column("accepted").cast(pa.int64())).as_py() or 0),
            names=sorted(pc.unique(table.column("name")).to_pylist()),
            calls_without_tokens=int(pc.sum(table.column("calls_without_tokens")).as_py() or 0),
            repaired=int(pc.sum(table.column("repaired")).as_py() or 0),
            window_operations=lambda rows: operations_of(_read(taken(table.column("operations"), rows))),
        )

    @classmethod
    def _ranked(
        cls,
        percentile: float,
        durations: np.ndarray,
        rank: Callable[[np.ndarray], np.ndarray],
        components: np.ndarray,
        serial_calls: np.ndarray,
        whatifs: Sequence[np.ndarray],
        *,
        accepted: int,
        names: list[str],
        calls_without_tokens: int,
        repaired: int,
        window_operations: Callable[[np.ndarray], Iterable[Mapping[str, Sequence[Any]]]],
    ) -> Population:
        """The population of tasks given as columns (row ``i`` is task ``i``).  ``rank`` gives the order
        of the rows it is given by duration, trace id and span id (positions into them), which only the
        window needs; ``window_operations`` gives the operations of the tasks at the rows it is given, in
        that order."""
        count = len(durations)
        wanted = (*WHATIF_PERCENTILES, percentile)
        whatif = [_percentiles(column, wanted) for column in whatifs]
        window = _window_rows(durations, percentile, rank)
        index = C.KEY_INDEX
        summed = _ns_sums(components)
        return cls(
            count=count,
            accepted=accepted,
            names=names,
            duration_ns=_percentiles(durations, (*LATENCY_PERCENTILES, percentile)),
            max_ns=durations.max().item(),
            mean_ns=_exact_sum(durations) / count,
            mean_components=[total / count for total in summed],
            window=Window.of(np.take(components, window, axis=0), window_operations(window)),
            serial_mean=int(serial_calls.sum()) / count,
            serial_p95=_percentiles(serial_calls, (95,))[95],
            split_measured_ns=float(summed[index[C.PREFILL]] + summed[index[C.DECODE]]),
            unsplit_ns=float(summed[index[C.UNSPLIT]]),
            whatif_ns=whatif,
            calls_without_tokens=calls_without_tokens,
            repaired=repaired,
        )


def window_durations(durations: np.ndarray, percentile: float, added: int = 0) -> tuple[int, int] | None:
    """The least and the greatest duration a task of ``durations`` may have and be in the budget's window
    at ``percentile``, whatever up to ``added`` more tasks rank among them; None when there are none.

    A reader that has yet to analyse its changed traces (``added`` bounds their tasks) reads the
    operations of these tasks only.  A task ranked ``r``-th of ``n`` ranks from ``r`` to ``r + added``
    among all, and the window's ranks (:func:`window_ranks`) only grow with the tasks counted; so a task
    in the window ranks from its first rank of ``n`` tasks less ``added``, to its last of ``n + added``."""
    count = len(durations)
    if not count:
        return None
    first = max(1, window_ranks(count, percentile)[0] - added)
    last = min(count, window_ranks(count + added, percentile)[1])
    return _nth(durations, first - 1), _nth(durations, last - 1)


class OperationsNotRead(LookupError):
    """A task in the budget's window was read without its operations: more tasks were analysed than the
    read of the others allowed for (:func:`window_durations`), and the rows must be read again whole."""


def _window_rows(
    durations: np.ndarray, percentile: float, rank: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The rows of the tasks in the budget's window (:func:`window_ranks`), in rank order.

    Ranking every task (a sort by duration, trace id and span id: 0.1 s at 500,000 tasks) is not
    needed for it: the tasks ranked before the window are those faster than its first, and only the
    tasks as slow as its first to as slow as its last are ranked."""
    lo, hi = window_ranks(len(durations), percentile)
    first, last = _nth(durations, lo - 1), _nth(durations, hi - 1)
    before = int(np.count_nonzero(durations < first))
    near = np.flatnonzero((durations >= first) & (durations <= last))
    return near[rank(near)][lo - 1 - before : hi - before]


def _read(operations: pa.Array) -> pa.Array:
    """The window's ``operations``, every one of them read (:class:`OperationsNotRead`)."""
    if operations.null_count:
        raise OperationsNotRead(f"{operations.null_count} of the window's tasks were read without operations")
    return operations


def list_matrix(column: pa.ChunkedArray, rows: int) -> np.ndarray:
    """A list column whose lists are all of one length as a ``rows`` × length matrix."""
    return numbers(pc.list_flatten(column)).astype(np.float64, copy=False).reshape(rows, -1)


def list_columns(column: pa.ChunkedArray, picks: Sequence[int] | None = None) -> list[np.ndarray]:
    """The values at positions ``picks`` (every position, where not given) of a list column whose lists
    are all of one length: an array across the rows a position.

    A matrix of every row's list (what :func:`list_matrix` makes) copies all of them first: at 500,000
    tasks and 38 kept what-ifs, 152 MB of fresh memory, most of what a curve or a report of a few
    what-ifs cost.  Gathering each position across the rows reads a cache line a value, the whole list
    column once per position.  So the chunks' values are read where they lie, ``LIST_BLOCK_ROWS`` rows
    at a time, each block once, and its picked positions copied out."""
    chunks = [chunk for chunk in column.chunks if len(chunk)]
    if not chunks:
        return [np.empty(0) for _ in picks or ()]
    flats = [numbers(chunk.flatten()) for chunk in chunks]
    width = len(flats[0]) // len(chunks[0])
    at = np.arange(width) if picks is None else np.asarray(picks, dtype=np.intp)
    out = np.empty((len(at), sum(len(chunk) for chunk in chunks)))
    row = 0
    for flat in flats:
        lists = flat.reshape(-1, width)
        for first in range(0, len(lists), LIST_BLOCK_ROWS):
            block = lists[first : first + LIST_BLOCK_ROWS]
            out[:, row : row + len(block)] = block[:, at].T
            row += len(block)
    return list(out)


LIST_BLOCK_ROWS = 1 << 14
"""Rows of a list column read at a time by :func:`list_columns` (38 what-ifs: 5 MB)."""


IN_ORDER_ROWS = 1 << 16
"""Rows summed at a time by :func:`_in_order` and :func:`_ns_sums`."""


def _in_order(values: np.ndarray) -> np.ndarray:
    """The sum of ``values`` (at least one row) along the first axis, the rows added one after another
    in their order, as Python's ``sum`` adds (``np.sum`` may add pairwise, which rounds differently).

    A running sum of every row would be a copy of ``values``, so the rows are summed a block at a
    time, each block's running sum starting from the last one's total."""
    total = None
    for start in range(0, len(values), IN_ORDER_ROWS):
        block = values[start : start + IN_ORDER_ROWS]
        if total is not None:
            block = np.concatenate([total, block])
        total = np.cumsum(block, axis=0)[-1:]
    if total is None:
        raise ValueError("no rows to sum")
    return total[0]


def _ns_sums(values: np.ndarray) -> list[int | float]:
    """Each column's sum of a tasks × columns matrix of nanoseconds, every value rounded to a whole
    nanosecond and the whole numbers added exactly: the same sum in any order of the rows.

    A float sum depends on the order it adds in, and ranking every task to fix one cost more than
    the sums.  A column holding a value that is not finite sums as floats (to NaN or infinity)."""
    finite = np.isfinite(values).all(axis=0)
    rounded = values if finite.all() else np.where(finite, values, 0.0)
    sums = [0] * values.shape[1]
    for start in range(0, len(values), IN_ORDER_ROWS):
        block = np.rint(rounded[start : start + IN_ORDER_ROWS]).astype(np.int64)
        sums = [a + b for a, b in zip(sums, _exact_sums(block), strict=True)]
    return [
        total if ok else float(np.sum(values[:, k]))
        for k, (total, ok) in enumerate(zip(sums, finite, strict=True))
    ]


def _exact_sum(values: np.ndarray) -> int:
    """The sum of 64-bit integers (fewer than 2**31 of them), exactly: NumPy's would wrap past 2**63, and
    Python's ``sum`` of the list takes 30 times as long."""
    return _exact_sums(values[:, None])[0]


def _exact_sums(values: np.ndarray) -> list[int]:
    """:func:`_exact_sum` of each column of a matrix: each half of the bits sums within 64 bits."""
    high, low = np.sum(values >> 32, axis=0), np.sum(values & 0xFFFFFFFF, axis=0)
    return [(int(h) << 32) + int(lo) for h, lo in zip(high, low, strict=True)]


def _speedups_json(speedups: Mapping[str, float]) -> dict[str, float | str]:
    return {key: ("inf" if math.isinf(value) else value) for key, value in speedups.items()}


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


CATEGORY_WORDS = {
    "inference": "model inference",
    "queue": "queueing",
    "network": "network",
    "tool": "tools",
    "db": "database calls",
    "retry": "retries and backoff",
    "cpu": "the agent's own CPU",
    "other": "untraced waits",
}


def _scenario_words(scenario: Scenario) -> str:
    speedups = scenario.speedups
    if scenario.name.startswith("chip "):
        return f"The {scenario.name[5:]} preset"
    if len(speedups) == 1:
        ((key, factor),) = speedups.items()
        if math.isinf(factor):
            return f"Even infinitely fast {CATEGORY_WORDS.get(key, key)}"
        target = "inference chip" if key == "inference" else CATEGORY_WORDS.get(key, key)
        return f"A {factor:g}× faster {target}"
    return f"The scenario {scenario.name}"


def verdict(
    percentile: float,
    p_ms: float,
    new_ms: float,
    headline: Scenario,
    budget: Sequence[Mapping[str, Any]],
    operations: Sequence[Mapping[str, Any]],
) -> str:
    """One sentence that answers the chip question."""
    label = f"p{percentile:g}"
    change = (new_ms - p_ms) / p_ms if p_ms > 0 else 0.0
    largest = max(budget, key=lambda row: row["ms"])
    leader = next((op for op in operations if op["category"] == largest["category"]), None)
    led_by = f", led by {leader['name']}" if leader else ""
    percent = f"{change:+.0%}".replace("-", "−")
    return (
        f"{_scenario_words(headline)} would cut {label} from {_seconds(p_ms)} to {_seconds(new_ms)} "
        f"({percent}); {largest['share']:.0%} of the {label} is "
        f"{CATEGORY_WORDS[largest['category']]}{led_by}."
    )


def blame(
    results: Sequence[TaskResult],
    scenarios: Sequence[Scenario] = DEFAULT_SCENARIOS,
    percentile: float = 95,
    headline: Scenario | None = None,
    targets: Sequence[CandidateProfile] = (),
) -> dict[str, Any]:
    """The ``agentscope.blame/v1`` report.

    ``results`` carry what-if times for ``variants(scenarios)`` and then, when
    ``targets`` are given, one for each target (the last ``len(targets)``).
    """
    return render(Population.of(results, percentile), scenarios, percentile, headline, targets)


def render(
    population: Population,
    scenarios: Sequence[Scenario] = DEFAULT_SCENARIOS,
    percentile: float = 95,
    headline: Scenario | None = None,
    targets: Sequence[CandidateProfile] = (),
) -> dict[str, Any]:
    """The ``agentscope.blame/v1`` report of a population of tasks (see :func:`blame`)."""
    pop = population
    p_ns = pop.duration_ns[percentile]
    window = pop.window
    mean_window = [total / window.count for total in window.components] if window.count else window.components
    window_total = sum(mean_window)
    factor = p_ns / window_total if window_total > 0 else 0.0
    budget_components = [v * factor for v in mean_window]
    budget = _category_rows(budget_components, p_ns)
    operations = sorted(
        (
            {
                "name": label,
                "category": category,
                "ms": _ms(ns / window.count * factor),
                "share": (ns / window.count * factor) / p_ns if p_ns > 0 else 0.0,
                "calls_per_task": calls / window.count,
            }
            for label, (category, ns, calls) in window.operations.items()
        ),
        key=lambda op: -op["ms"],
    )[:TOP_OPERATIONS]

    whatif = []
    p95_ns = pop.duration_ns[95]
    for k, scenario in enumerate(scenarios):
        optimistic, pessimistic = pop.whatif_ns[2 * k], pop.whatif_ns[2 * k + 1]
        new_p95 = optimistic[95]
        whatif.append(
            {
                "scenario": scenario.name,
                "speedups": _speedups_json(scenario.speedups),
                "p50_ms": _ms(optimistic[50]),
                "p95_ms": _ms(new_p95),
                "p95_change": (new_p95 - p95_ns) / p95_ns if p95_ns > 0 else 0.0,
                "p95_ms_range": [_ms(new_p95), _ms(pessimistic[95])],
            }
        )

    offset = len(pop.whatif_ns) - len(targets)
    for t, target in enumerate(targets):
        predicted = pop.whatif_ns[offset + t]
        new_p95 = predicted[95]
        whatif.append(
            {
                "scenario": f"target {target.name}",
                "target": target.name,
                "p50_ms": _ms(predicted[50]),
                "p95_ms": _ms(new_p95),
                "p95_change": (new_p95 - p95_ns) / p95_ns if p95_ns > 0 else 0.0,
                "p95_ms_range": [_ms(new_p95), _ms(new_p95)],
                "calls_without_tokens": pop.calls_without_tokens,
                "concurrency": target.concurrency,
            }
        )

    headline = headline or next((s for s in scenarios if s.name == "inference x3.6"), scenarios[0])
    k = list(scenarios).index(headline)
    headline_new_ns = pop.whatif_ns[2 * k][percentile]
    split_total = pop.split_measured_ns + pop.unsplit_ns
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "percentile": int(percentile) if float(percentile).is_integer() else percentile,
        "tasks": {"count": pop.count, "accepted": pop.accepted, "names": pop.names},
        "latency_ms": {
            "p50": _ms(pop.duration_ns[50]),
            "p90": _ms(pop.duration_ns[90]),
            "p95": _ms(p95_ns),
            "p99": _ms(pop.duration_ns[99]),
            "mean": _ms(pop.mean_ns),
            "max": _ms(pop.max_ns),
        },
        "budget": budget,
        "mean": _category_rows(pop.mean_components, pop.mean_ns),
        "operations": operations,
        "serial_llm_calls": {"mean": pop.serial_mean, "p95": pop.serial_p95},
        "inference_split_measured": pop.split_measured_ns / split_total if split_total > 0 else 0.0,
        "whatif": whatif,
        "repaired_spans": pop.repaired,
    }
    if pop.approximate is not None:
        report["approximate"] = pop.approximate
    report["verdict"] = verdict(percentile, _ms(p_ns), _ms(headline_new_ns), headline, budget, operations)
    if targets:
        best = min((row for row in whatif if "target" in row), key=lambda row: row["p95_ms"])
        percent = f"{best['p95_change']:+.0%}".replace("-", "−")
        report["verdict"] = (
            f"Of the targets, {best['target']} would bring p95 from {_seconds(_ms(p95_ns))} to "
            f"{_seconds(best['p95_ms'])} ({percent}). "
            if best["p95_change"] < 0
            else f"No target would shorten p95 ({_seconds(_ms(p95_ns))}). "
        ) + report["verdict"]
    return report


TRACE_SCHEMA = "agentscope.trace/v1"


def trace_report(explanation: TraceExplanation) -> dict[str, Any]:
    """The ``agentscope.trace/v1`` object: one task's critical path and attribution.

    A segment on a span whose time is mixed (an LLM call: queue, prefill, decode,
    network) is listed as consecutive pieces, one per component, in that order.
    Times are integer nanoseconds from the task's start until the last step, so
    adjacent pieces share their bounds exactly.
    """
    trace, task, result = explanation.trace, explanation.task, explanation.result
    origin = trace.start[task]
    path = []
    for span, a, b in explanation.segments:
        lo, length = a - origin, b - a
        cumulative = 0.0
        piece_start = lo
        mix = explanation.segment_mix(span, a, b)
        for n, (key, fraction) in enumerate(mix):
            cumulative += fraction
            piece_end = b - origin if n == len(mix) - 1 else lo + round(length * cumulative)
            category, _, component = key.partition(".")
            path.append(
                {
                    "span_id": trace.span_id(span),
                    "name": trace.value("name", span),
                    "category": category,
                    "component": component or None,
                    "start_ms": _ms(piece_start),
                    "end_ms": _ms(piece_end),
                }
            )
            piece_start = piece_end
    return {
        "schema": TRACE_SCHEMA,
        "trace_id": result.trace_id,
        "explained": "task" if explanation.is_task else "root",
        "task": {"name": result.name, "span_id": result.span_id, "duration_ms": _ms(result.duration_ns)},
        "critical_path": path,
        "attribution": {category: _ms(ns) for category, ns in result.category_ns().items()},
        "orphans": [trace.span_id(i) for i in trace.orphans],
        "repaired": [
            {"span_id": trace.span_id(r.span), "rule": r.rule, "new_parent_id": trace.span_id(r.new_parent)}
            for r in explanation.repairs()
        ],
    }
