"""The Spark path gives the DuckDB path's answers on the same spans (DESIGN §10).

A real local Spark (``local[2]``, Java 17) runs the unchanged batch function in
``applyInPandas``.  Without PySpark or Java these tests skip, except in CI
(``AGENTSCOPE_REQUIRE_SPARK=1``), where they fail.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from clirun import cli
from tracebuild import varied_store
from traces_fixtures import otlp_request, otlp_span

from agentscope.analysis import report
from agentscope.analysis.pipeline import blame_store, task_results
from agentscope.store import Store
from agentscope.store.export import MANIFEST, bucket_of, export_parquet


def _require_spark():
    missing = None
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing = "PySpark (pip install -e '.[spark]')"
    if missing is None and not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        missing = "Java 17"
    if missing is None:
        return
    if os.environ.get("AGENTSCOPE_REQUIRE_SPARK") == "1":
        pytest.fail(f"the Spark tests need {missing}")
    pytest.skip(f"the Spark tests need {missing}")


@pytest.fixture(scope="module")
def spark():
    _require_spark()
    from agentscope.engines import spark as engine

    session = engine.session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "demo", "--tasks", "6", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return store


@pytest.fixture(scope="module")
def varied(tmp_path_factory) -> Path:
    return varied_store(tmp_path_factory.mktemp("varied") / "varied.duckdb", 400)


def close(a: float, b: float, tolerance: float) -> bool:
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-9)


def assert_same_answers(duck: dict, spark: dict) -> None:
    """The equality the Spark path promises: counts, percentiles, budget and what-if."""
    assert spark["tasks"] == duck["tasks"]
    for key in ("p50", "p95", "p99"):
        assert close(spark["latency_ms"][key], duck["latency_ms"][key], 0.001), key
    for ours, theirs in zip(spark["budget"], duck["budget"], strict=True):
        assert ours["category"] == theirs["category"]
        assert close(ours["ms"], theirs["ms"], 0.005), ours["category"]
    assert [w["scenario"] for w in spark["whatif"]] == [w["scenario"] for w in duck["whatif"]]
    for ours, theirs in zip(spark["whatif"], duck["whatif"], strict=True):
        for key in ("p50_ms", "p95_ms"):
            assert close(ours[key], theirs[key], 0.005), (ours["scenario"], key)
    assert spark["verdict"] == duck["verdict"]


def duckdb_answers(store: Path, **options) -> tuple[dict, list[tuple]]:
    with Store(store, read_only=True) as opened:
        blame = blame_store(opened, **options)
        tasks = task_results(opened, workers=1)
    return blame, sorted((t.trace_id, t.span_id, t.duration_ns) for t in tasks)


def spark_tasks(spark_df) -> list[tuple]:
    from agentscope.engines import spark as engine

    return sorted((t.trace_id, t.span_id, t.duration_ns) for t in engine.collect_results(spark_df))


@pytest.mark.parametrize("which", ["demo_store", "varied"])
def test_spark_and_duckdb_give_the_same_report(which, spark, tmp_path, request):
    from agentscope.engines import spark as engine

    store = request.getfixturevalue(which)
    out = tmp_path / "spans"
    with Store(store, read_only=True) as opened:
        manifest = export_parquet(opened, out, buckets=4)
    duck, duck_tasks = duckdb_answers(store)
    frame = spark.read.parquet(str(out))
    assert frame.count() == manifest.spans
    assert spark_tasks(engine.task_results(frame)) == duck_tasks
    ours = engine.blame(frame)
    assert_same_answers(duck, ours)
    assert ours == duck  # the same function on the same spans, summed in the same order


def test_traces_spread_over_many_files_are_shuffled_back_together(spark, varied, tmp_path):
    """No bucket column and each trace's spans scattered over 25 files: Spark must group by trace."""
    from agentscope.engines import spark as engine

    with Store(varied, read_only=True) as opened:
        export_parquet(opened, tmp_path / "bucketed", buckets=1)
    table = ds.dataset(tmp_path / "bucketed", partitioning="hive").to_table().drop_columns(["bucket"])
    order = list(range(table.num_rows))
    random.Random(3).shuffle(order)
    scattered = tmp_path / "scattered"
    scattered.mkdir()
    shuffled = table.take(pa.array(order))
    for k in range(25):
        pq.write_table(
            shuffled.slice(k * (table.num_rows // 25 + 1), table.num_rows // 25 + 1),
            scattered / f"{k}.parquet",
        )
    frame = spark.read.parquet(str(scattered))
    assert frame.rdd.getNumPartitions() > 1
    duck, duck_tasks = duckdb_answers(varied)
    assert spark_tasks(engine.task_results(frame, buckets=7)) == duck_tasks
    assert_same_answers(duck, engine.blame(frame))


def test_a_dropped_trace_id_and_every_null_form_still_give_the_same_tasks(spark, varied, tmp_path):
    """Traces are found by parent links inside each bucket when ``trace_id`` is gone; nulls come as
    None, NaN and ``pd.NA`` once pandas holds the frame."""
    import pandas as pd

    from agentscope.engines import spark as engine

    with Store(varied, read_only=True) as opened:
        export_parquet(opened, tmp_path / "spans", buckets=3)
    pandas_frame = ds.dataset(tmp_path / "spans", partitioning="hive").to_table().to_pandas()
    pandas_frame["ttft_s"] = pandas_frame["ttft_s"].astype("Float64")  # nulls as pd.NA
    pandas_frame["attempt"] = pandas_frame["attempt"].astype("float64")  # nulls as NaN
    assert pandas_frame["ttft_s"].isna().any() and pandas_frame["attempt"].isna().any()
    frame = spark.createDataFrame(pandas_frame.drop(columns=["trace_id"]))
    duck, duck_tasks = duckdb_answers(varied)
    ours = engine.blame(frame)
    assert ours["tasks"] == duck["tasks"]
    assert_same_answers(duck, ours)
    durations = sorted(d for _, _, d in spark_tasks(engine.task_results(frame)))
    assert durations == sorted(d for _, _, d in duck_tasks)
    assert pd.isna(pandas_frame["parent_id"]).sum() == duck["tasks"]["count"]


def test_past_the_exact_size_percentiles_are_approximate_and_say_so(spark, varied, tmp_path):
    from agentscope.engines import spark as engine

    with Store(varied, read_only=True) as opened:
        export_parquet(opened, tmp_path / "spans", buckets=2)
    duck, _ = duckdb_answers(varied)
    approximate = engine.blame(spark.read.parquet(str(tmp_path / "spans")), exact_max_tasks=100)
    assert approximate["approximate"] == {
        "method": "percentile_approx",
        "accuracy": engine.APPROX_ACCURACY,
        "exact_max_tasks": 100,
    }
    assert "approximate" not in duck
    assert_same_answers(duck, approximate)
    schema = Path(__file__).parent.parent / "docs" / "schemas" / "blame.v1.schema.json"
    jsonschema.validate(approximate, json.loads(schema.read_text()))


def test_export_is_bucketed_by_a_stable_hash_with_a_manifest(varied, tmp_path):
    out = tmp_path / "spans"
    with Store(varied, read_only=True) as opened:
        manifest = export_parquet(opened, out, buckets=5)
        spans = opened.span_count()
    saved = json.loads((out / MANIFEST).read_text())
    assert saved["spans"] == manifest.spans == spans and saved["buckets"] == 5 and saved["traces"] == 400
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [f"bucket={k}" for k in range(5)]
    table = ds.dataset(out, partitioning="hive").to_table()
    assert all(
        bucket_of(trace, 5) == bucket
        for trace, bucket in zip(table["trace_id"].to_pylist(), table["bucket"].to_pylist(), strict=True)
    )
    assert pq.ParquetFile(next(out.rglob("*.parquet"))).metadata.row_group(0).column(0).compression == "ZSTD"
    with Store(varied, read_only=True) as opened:
        export_parquet(opened, out, buckets=2)  # an earlier export is replaced
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["bucket=0", "bucket=1"]


def test_cli_export_then_blame_on_spark_prints_the_duckdb_report(varied, tmp_path):
    _require_spark()
    out = tmp_path / "spans"
    exported = cli("export", "--store", str(varied), "--out", str(out), "--buckets", "3")
    assert exported.returncode == 0, exported.stderr
    assert "400" in exported.stdout and (out / MANIFEST).exists()
    on_spark = cli("blame", "--engine", "spark", str(out), "--spark-master", "local[2]", "--format", "json")
    assert on_spark.returncode == 0, on_spark.stderr
    assert on_spark.stderr == ""  # the JVM's log stays out of the terminal
    on_duckdb = cli("blame", "--store", str(varied), "--format", "json")
    assert json.loads(on_spark.stdout) == json.loads(on_duckdb.stdout)


def test_spark_connect_is_used_when_spark_remote_is_set(varied, tmp_path):
    """``SPARK_REMOTE=local[2]`` starts a local Spark Connect server: the CLI then talks to it as a client."""
    _require_spark()
    out = tmp_path / "spans"
    with Store(varied, read_only=True) as opened:
        export_parquet(opened, out, buckets=2)
    remote = cli("blame", "--engine", "spark", str(out), "--format", "json", env={"SPARK_REMOTE": "local[2]"})
    assert remote.returncode == 0, remote.stderr[-2000:]
    on_duckdb = cli("blame", "--store", str(varied), "--format", "json")
    assert json.loads(remote.stdout) == json.loads(on_duckdb.stdout)


def test_spark_submit_runs_the_cli_module_as_its_entry_point(varied, tmp_path):
    _require_spark()
    import importlib.util

    import pyspark

    entry = importlib.util.find_spec("agentscope.cli.__main__").origin

    out = tmp_path / "spans"
    with Store(varied, read_only=True) as opened:
        export_parquet(opened, out, buckets=2)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    result = subprocess.run(
        [
            str(submit),
            "--master",
            "local[2]",
            entry,
            "blame",
            "--engine",
            "spark",
            str(out),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report_json = json.loads(result.stdout)
    assert report_json["schema"] == report.SCHEMA and report_json["tasks"]["count"] == 400


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["blame", "--engine", "spark"], "reads Parquet PATHs"),
        (["blame", "--engine", "spark", "no-such-folder"], "no such file or folder: no-such-folder"),
        (["blame", "--engine", "flink", "x"], "choose duckdb or spark"),
        (["export", "--out", "x", "--format", "csv"], "only parquet"),
    ],
)
def test_spark_and_export_usage_errors_are_one_line(args, message, tmp_path):
    result = cli(*args, env={"AGENTSCOPE_STORE": str(tmp_path / "none.duckdb")})
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr


def test_a_file_that_is_not_parquet_is_named_in_the_message(varied):
    _require_spark()
    result = cli("blame", "--engine", "spark", str(varied), "--spark-master", "local[1]")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    flat = " ".join(result.stderr.split())
    assert f"Spark could not analyse {varied}" in flat and "Parquet" in flat


def test_an_empty_folder_and_a_task_table_given_to_spark_say_what_they_are(varied, tmp_path):
    (tmp_path / "empty").mkdir()
    empty = cli("blame", "--engine", "spark", str(tmp_path / "empty"))
    assert empty.returncode == 2
    flat = " ".join(empty.stderr.split())
    assert f"no Parquet files in {tmp_path / 'empty'} (agentscope export writes them)" in flat
    _require_spark()
    exported = cli("export", "--store", str(varied), "--tasks", "--out", str(tmp_path / "tasks"))
    assert exported.returncode == 0, exported.stderr
    tasks = cli("blame", "--engine", "spark", str(tmp_path / "tasks"), "--spark-master", "local[1]")
    assert tasks.returncode == 2 and "Traceback" not in tasks.stderr
    assert "(per-task tables, which blame --tasks reads)" in " ".join(tasks.stderr.split())


def test_export_refuses_a_folder_that_holds_something_else(varied, tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    result = cli("export", "--store", str(varied), "--out", str(tmp_path))
    assert result.returncode == 2 and "holds no agentscope export" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_task_tables_of_two_periods_add_up_to_the_report_of_both(spark, varied, tmp_path):
    from agentscope.engines import spark as engine

    with Store(varied, read_only=True) as opened:
        export_parquet(opened, tmp_path / "spans", buckets=2)
    frame = spark.read.parquet(str(tmp_path / "spans"))
    for half in (0, 1):  # each bucket stands for one day's traces
        engine.task_results(frame.where(frame.bucket == half)).write.parquet(str(tmp_path / f"tasks-{half}"))
    both = spark.read.parquet(str(tmp_path / "tasks-0"), str(tmp_path / "tasks-1"))
    assert engine.blame_tasks(both) == engine.blame(frame)


def test_buckets_without_tasks_give_the_duckdb_report(spark, demo_store, tmp_path):
    """Real stores have buckets whose traces hold no task (health checks, lone spans): they add no row."""
    from agentscope.engines import spark as engine
    from agentscope.ingest import ingest

    store = tmp_path / "with-lone-spans.duckdb"
    shutil.copy(demo_store, store)
    lone = [otlp_span(f"{n + 1:032x}", f"{n + 1:016x}", None, "GET /health", n, n + 2) for n in range(40)]
    (tmp_path / "lone.jsonl").write_text(json.dumps(otlp_request(lone, "gateway")) + "\n")
    with Store(store) as opened:
        assert ingest(opened, [tmp_path / "lone.jsonl"]).stored == 40
    out = tmp_path / "spans"
    with Store(store, read_only=True) as opened:
        export_parquet(opened, out, buckets=32)
    duck, duck_tasks = duckdb_answers(store)
    with_tasks = {bucket_of(trace, 32) for trace, _, _ in duck_tasks}
    table = ds.dataset(out, partitioning="hive").to_table()
    assert set(table["bucket"].to_pylist()) - with_tasks  # some buckets hold spans but no task
    frame = spark.read.parquet(str(out))
    assert spark_tasks(engine.task_results(frame)) == duck_tasks
    assert engine.blame(frame) == duck


def test_a_spark_runs_task_tables_and_the_stores_give_the_stores_report_without_spark(varied, tmp_path):
    """A daily Spark job saves its per-task table (``--tasks-out``); ``blame --tasks`` over the days' tables
    prints, with no Spark, what ``blame --store`` prints, as it does over the store's own exported table."""
    _require_spark()
    out = tmp_path / "spans"
    assert cli("export", "--store", str(varied), "--out", str(out), "--buckets", "2").returncode == 0
    for day in (0, 1):  # each bucket stands for one day's traces
        run = cli(
            "blame",
            "--engine",
            "spark",
            str(out / f"bucket={day}"),
            "--spark-master",
            "local[2]",
            "--tasks-out",
            str(tmp_path / f"tasks-{day}"),
            "--format",
            "json",
        )
        assert run.returncode == 0, run.stderr
    on_store = json.loads(cli("blame", "--store", str(varied), "--format", "json").stdout)
    days = cli(
        "blame",
        "--tasks",
        str(tmp_path / "tasks-0"),
        "--tasks",
        str(tmp_path / "tasks-1"),
        "--format",
        "json",
    )
    assert days.returncode == 0, days.stderr
    assert json.loads(days.stdout) == on_store
    exported = cli("export", "--tasks", "--store", str(varied), "--out", str(tmp_path / "kept"))
    assert exported.returncode == 0 and "400 tasks" in exported.stdout, exported.stderr
    kept = cli("blame", "--tasks", str(tmp_path / "kept"), "--task", "triage", "--format", "json")
    on_store_triage = cli("blame", "--store", str(varied), "--task", "triage", "--format", "json")
    assert json.loads(kept.stdout) == json.loads(on_store_triage.stdout)
    no_services = cli("blame", "--tasks", str(tmp_path / "tasks-0"), "--service", "svc")
    assert no_services.returncode == 2 and "name no services" in no_services.stderr
