"""Blame on Spark: the unchanged batch function inside ``applyInPandas`` over buckets of traces (DESIGN §10).

Each bucket holds whole traces, so ``agentscope.analysis.tasks.analyze`` runs on it
as it does on a DuckDB batch; only the small per-task table comes back to the
driver, where ``agentscope.analysis.report`` computes exact percentiles.  Past
``EXACT_MAX_TASKS`` tasks the table stays in the cluster and the percentiles
come from ``percentile_approx`` (the report says so under ``approximate``).

    from agentscope.engines import spark as ags_spark
    session = ags_spark.session()                      # local[*], spark-submit's master, or SPARK_REMOTE
    report = ags_spark.blame(session.read.parquet("spans/"))
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from agentscope.analysis import categories as C
from agentscope.analysis import report
from agentscope.analysis.batch import REQUIRED
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.rows import columns_of, results_from_table
from agentscope.analysis.tasks import TaskResult, analyze
from agentscope.analysis.whatif import Scenario

SPANS_PER_BUCKET = 100_000
"""Spans per ``applyInPandas`` group when the input has no ``bucket`` column (as in the DuckDB path)."""
EXACT_MAX_TASKS = 5_000_000
"""Up to this many tasks the per-task table is collected (about 1 KB a task) and percentiles are exact."""
APPROX_ACCURACY = 100_000
"""``percentile_approx`` accuracy past ``EXACT_MAX_TASKS``: a rank error of at most 1/100,000 of the tasks."""

TASK_SCHEMA = (
    "trace_id string, span_id string, name string, start_ns long, duration_ns long, accepted boolean, "
    "components array<double>, whatif_ns array<double>, operations string, models string, "
    "serial_llm_calls int, llm_calls int, input_tokens long, output_tokens long, cached_tokens long, "
    "repaired int, calls_without_tokens int"
)
"""The per-task table: ``TaskResult``'s fields; ``operations`` and ``models`` as JSON objects."""


def session(master: str | None = None, app_name: str = "agentscope") -> SparkSession:
    """A Spark session: Spark Connect when ``SPARK_REMOTE`` is set, else ``master``.

    Without either, PySpark's own default applies: ``spark-submit``'s ``--master``
    when run under it, ``local[*]`` otherwise.
    """
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if os.environ.get("SPARK_REMOTE"):
        return builder.getOrCreate()
    if master is not None:
        builder = builder.master(master)
    python = own_worker_python(master)
    if python is not None:  # PySpark reads it when the context starts and sends it with every function
        os.environ["PYSPARK_PYTHON"] = python
    return builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()


def own_worker_python(master: str | None) -> str | None:
    """This interpreter, for Python workers that run on this machine and that the user chose no Python for.

    Spark starts its Python workers with ``python3`` from PATH unless told
    otherwise, which is not agentscope's Python when the console script runs from
    a virtualenv that is not activated (or from pipx): the workers then cannot
    import agentscope.  Executors of a local master, or of a standalone master on
    loopback (whose workers can only be on this machine), run ``sys.executable``
    instead.  ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` in
    spark-defaults.conf win; under ``spark-submit`` its options decide.
    """
    if os.environ.get("PYSPARK_PYTHON") or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    if _defaults_name_python():
        return None
    where = master or "local[*]"
    on_this_machine = where.startswith("local") or re.match(r"spark://(127\.[\d.]+|localhost)(:\d+)?$", where)
    return sys.executable if on_this_machine else None


def _defaults_name_python() -> bool:
    """Whether spark-defaults.conf (in SPARK_CONF_DIR, else SPARK_HOME/conf) sets the workers' Python."""
    folder = os.environ.get("SPARK_CONF_DIR") or os.path.join(os.environ.get("SPARK_HOME", ""), "conf")
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as conf:
            return any(line.split(None, 1)[:1] == ["spark.pyspark.python"] for line in conf)
    except OSError:
        return False


def _rows(results: Sequence[TaskResult]) -> pd.DataFrame:
    """The per-task table of one bucket; every column is of Python objects, so that a bucket without
    tasks gives empty columns Arrow can convert to ``TASK_SCHEMA`` (pandas would make them float64,
    which Arrow cannot turn into ``array<double>``)."""
    frame = columns_of(results)
    return pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in frame.items()})


def _group_key(df: DataFrame, buckets: int | None) -> Column:
    """Whole traces per group: the export's ``bucket``, else a hash of the trace id, else one group.

    With neither column, spans are grouped into traces by parent links inside
    the single group, which suits small frames only.
    """
    if "trace_id" in df.columns and (buckets is not None or "bucket" not in df.columns):
        count = buckets or max(1, math.ceil(df.count() / SPANS_PER_BUCKET))
        return F.pmod(F.xxhash64("trace_id"), F.lit(count))
    if "bucket" in df.columns:
        return F.col("bucket")
    return F.lit(0)


def task_results(
    df: DataFrame,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    *,
    task_name: str | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    buckets: int | None = None,
) -> DataFrame:
    """One row per task (``TASK_SCHEMA``), computed by ``analyze`` on each bucket of traces.

    ``df`` has the analyzer's columns (``agentscope.analysis.batch.COLUMNS``; the
    optional ones may be missing).  ``buckets`` regroups by a hash of the trace
    id instead of the export's ``bucket`` column.
    """
    missing = [name for name in REQUIRED if name not in df.columns]
    if missing:
        tasks = "whatif_ns" in df.columns and "duration_ns" in df.columns
        hint = "per-task tables, which blame --tasks reads" if tasks else "see agentscope export"
        raise ValueError(f"the spans lack required column(s) {', '.join(missing)} ({hint})")
    variants = report.variants(scenarios)
    targets = tuple(targets)

    def analyze_bucket(spans: pd.DataFrame) -> pd.DataFrame:
        return _rows(analyze(spans, variants, task_name=task_name, repair=repair, targets=targets))

    grouped = df.groupBy(_group_key(df, buckets).alias("agentscope_group"))
    return grouped.applyInPandas(analyze_bucket, TASK_SCHEMA)


def collect_results(tasks: DataFrame) -> list[TaskResult]:
    """The per-task table on the driver, as ``TaskResult`` objects (for ``report.blame`` or pricing)."""
    return results_from_table(tasks.toArrow())


def _approximate_population(
    tasks: DataFrame, count: int, percentile: float, exact_max_tasks: int
) -> report.Population:
    """The population from aggregates in the cluster; only the tasks near the percentile come back."""
    durations = sorted({*report.LATENCY_PERCENTILES, percentile, *report.window_percentiles(percentile)})
    whatifs = (*report.WHATIF_PERCENTILES, percentile)
    variants = len(tasks.select("whatif_ns").first()[0])

    def quantiles(column: Column, wanted: Sequence[float]) -> Column:
        return F.percentile_approx(column, [q / 100 for q in wanted], APPROX_ACCURACY)

    components = F.col("components")
    row = tasks.agg(
        F.sum(F.col("accepted").cast("long")).alias("accepted"),
        F.collect_set("name").alias("names"),
        quantiles(F.col("duration_ns"), durations).alias("durations"),
        F.max("duration_ns").alias("max"),
        F.avg("duration_ns").alias("mean"),
        F.array(*(F.avg(components[i]) for i in range(len(C.KEYS)))).alias("mean_components"),
        F.avg("serial_llm_calls").alias("serial_mean"),
        F.percentile_approx("serial_llm_calls", 0.95, APPROX_ACCURACY).alias("serial_p95"),
        F.sum(components[C.KEY_INDEX[C.PREFILL]] + components[C.KEY_INDEX[C.DECODE]]).alias("measured"),
        F.sum(components[C.KEY_INDEX[C.UNSPLIT]]).alias("unsplit"),
        F.array(*(quantiles(F.col("whatif_ns")[i], whatifs) for i in range(variants))).alias("whatif"),
        F.sum("calls_without_tokens").alias("calls_without_tokens"),
        F.sum("repaired").alias("repaired"),
    ).first()
    duration_ns = dict(zip(durations, row["durations"], strict=True))
    low, high = (duration_ns[q] for q in report.window_percentiles(percentile))
    near = collect_results(tasks.where(F.col("duration_ns").between(low, high)))
    near.sort(key=lambda r: (r.duration_ns, r.trace_id or "", r.span_id))
    window = report.Window.of(
        np.array([r.components for r in near], dtype=np.float64), [r.operations for r in near]
    )
    return report.Population(
        count=count,
        accepted=row["accepted"],
        names=sorted(row["names"]),
        duration_ns=duration_ns,
        max_ns=row["max"],
        mean_ns=row["mean"],
        mean_components=list(row["mean_components"]),
        window=window,
        serial_mean=row["serial_mean"],
        serial_p95=row["serial_p95"],
        split_measured_ns=row["measured"] or 0.0,
        unsplit_ns=row["unsplit"] or 0.0,
        whatif_ns=[dict(zip(whatifs, values, strict=True)) for values in row["whatif"]],
        calls_without_tokens=row["calls_without_tokens"],
        repaired=row["repaired"],
        approximate={
            "method": "percentile_approx",
            "accuracy": APPROX_ACCURACY,
            "exact_max_tasks": exact_max_tasks,
        },
    )


def blame(
    df: DataFrame,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    *,
    task_name: str | None = None,
    headline: Scenario | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    buckets: int | None = None,
    exact_max_tasks: int = EXACT_MAX_TASKS,
    tasks_out: str | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.blame/v1`` report of the spans in ``df``; None when they hold no task.

    With ``tasks_out`` (a folder, local or in object storage), the per-task table is saved there as
    Parquet first, and the report is made from what was saved: ``agentscope blame --tasks`` over that
    folder, or over a month of such folders, gives the same report without Spark.
    """
    tasks = task_results(df, scenarios, task_name=task_name, repair=repair, targets=targets, buckets=buckets)
    if tasks_out is not None:
        tasks.write.mode("overwrite").parquet(tasks_out)
        tasks = df.sparkSession.read.parquet(tasks_out)
    return blame_tasks(
        tasks, scenarios, percentile, headline=headline, targets=targets, exact_max_tasks=exact_max_tasks
    )


def blame_tasks(
    tasks: DataFrame,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    *,
    headline: Scenario | None = None,
    targets: Sequence[CandidateProfile] = (),
    exact_max_tasks: int = EXACT_MAX_TASKS,
) -> dict[str, Any] | None:
    """The report of a per-task table from :func:`task_results` (run with these ``scenarios``, ``targets``).

    Task tables add up: daily tables saved as Parquet and read back as one
    DataFrame give the report of the whole period without analysing its spans again.
    """
    tasks = tasks.persist()
    try:
        count = tasks.count()
        if count == 0:
            return None
        if count <= exact_max_tasks:
            population = report.Population.of(collect_results(tasks), percentile)
        else:
            population = _approximate_population(tasks, count, percentile, exact_max_tasks)
        return report.render(population, scenarios, percentile, headline, targets)
    finally:
        tasks.unpersist()
