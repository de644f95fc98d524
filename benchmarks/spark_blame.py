"""Blame on Spark against the DuckDB path: one store, exported to Parquet, analysed both ways.

    pip install -e '.[spark]' && python benchmarks/spark_blame.py [--traces 50000] [--buckets 8]

The store is the blame throughput benchmark's (20 agent-shaped spans a trace:
LLM calls with server timings, parallel tools, a failed HTTP attempt and its
backoff, DB calls).  Each run is a fresh process, timed from its start to the
report in hand; "warm" is a second blame in a process whose Spark session has
already run one.  Peak RSS is of the whole process tree (the JVM and its Python
workers included), sampled from /proc every 100 ms.  Shuffle volume comes from
the Spark UI's REST API on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import proctree
from blame_throughput import build_store

from agentscope.store.export import MANIFEST, Manifest

DUCKDB_RUN = """
import json, sys, time
from agentscope.analysis.pipeline import blame_store
from agentscope.store import Store
with Store(sys.argv[1], read_only=True) as store:
    report = blame_store(store)
print(json.dumps({"report": report}))
"""

SPARK_RUN = """
import time
t0 = time.perf_counter()
import json, sys, urllib.request
from pyspark.sql import SparkSession
from agentscope.engines import spark as engine
session = (SparkSession.builder.master("local[2]").appName("agentscope-bench")
           .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
           .config("spark.ui.port", "4047").config("spark.ui.showConsoleProgress", "false")
           .config("spark.driver.memory", "2g").getOrCreate())
session.sparkContext.setLogLevel("ERROR")
t_session = time.perf_counter() - t0
frame = session.read.parquet(sys.argv[1])
report = engine.blame(frame)
t_cold = time.perf_counter() - t0
report_warm = engine.blame(session.read.parquet(sys.argv[1]))
t_warm = time.perf_counter() - t0
app = session.sparkContext.applicationId
stages = json.load(urllib.request.urlopen(f"http://127.0.0.1:4047/api/v1/applications/{app}/stages"))
shuffle = sum(s.get("shuffleWriteBytes", 0) for s in stages) / 2
print(json.dumps({"report": report, "session_s": t_session, "cold_s": t_cold, "warm_s": t_warm - t_cold,
                  "same_warm": report_warm == report, "shuffle_bytes": shuffle}))
"""


ONE_BUCKET = """
import json, sys, time
import pyarrow.parquet as pq
from agentscope.analysis import report
from agentscope.analysis.tasks import analyze

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key))

spans = pq.read_table(sys.argv[1]).to_pandas()
loaded = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the high-water mark: the peak below is the analysis's own
t0 = time.perf_counter()
results = analyze(spans, report.variants(report.DEFAULT_SCENARIOS))
seconds = time.perf_counter() - t0
print(json.dumps({"spans": len(spans), "seconds": seconds, "rss_mb": status("VmHWM:"), "frame_mb": loaded}))
"""


def measure(code: str, *args: str) -> tuple[dict, float, float]:
    """(what the process printed last, wall seconds from start to exit, peak tree RSS in MB)."""
    out, seconds, peak = proctree.measure(
        [sys.executable, "-c", textwrap.dedent(code), *args], {"PYSPARK_PYTHON": sys.executable}
    )
    return json.loads(out.strip().splitlines()[-1]), seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--buckets", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "bench.duckdb"
        spans = build_store(store, args.traces)
        export = [sys.executable, "-m", "agentscope.cli", "export", "--store", str(store)]
        _, export_s, export_mb = proctree.measure(
            [*export, "--out", str(Path(tmp) / "spans"), "--buckets", str(args.buckets)]
        )
        manifest = Manifest(**json.loads((Path(tmp) / "spans" / MANIFEST).read_text()))
        duck, duck_s, duck_rss = measure(DUCKDB_RUN, str(store))
        spark, spark_s, spark_rss = measure(SPARK_RUN, str(Path(tmp) / "spans"))
        bucket, _, _ = measure(ONE_BUCKET, str(next((Path(tmp) / "spans").rglob("*.parquet"))))
    same = spark["report"] == duck["report"]
    cold = spark["cold_s"]
    print(
        f"{spans:,} spans, {args.traces:,} tasks; export to {manifest.files} Parquet files "
        f"({manifest.bytes / 1e6:.1f} MB, {args.buckets} buckets) in {export_s:.1f} s, "
        f"peak RSS {export_mb:.0f} MB (agentscope export, process start to exit)"
    )
    print("\n| path | seconds | spans/s | peak RSS, process tree (MB) |")
    print("|---|---:|---:|---:|")
    print(f"| DuckDB, process start to report | {duck_s:.1f} | {spans / duck_s:,.0f} | {duck_rss:,.0f} |")
    print(
        f"| Spark local[2], cold: process start to report (session {spark['session_s']:.1f} s) | "
        f"{cold:.1f} | {spans / cold:,.0f} | {spark_rss:,.0f} |"
    )
    warm = spark["warm_s"]
    print(
        f"| Spark local[2], warm: a second blame in the same session | {warm:.1f} | {spans / warm:,.0f} | |"
    )
    print(
        f"\nwhole Spark process {spark_s:.1f} s; shuffle written per blame "
        f"{spark['shuffle_bytes'] / 1e6:.1f} MB ({spark['shuffle_bytes'] / spans:.0f} bytes a span)"
    )
    per_million = bucket["seconds"] / bucket["spans"] * 1e6
    print(
        f"one bucket in one Python process (as a Spark task runs it): {bucket['spans']:,} spans as pandas, "
        f"analyze() {bucket['seconds']:.2f} s ({per_million:.1f} s per million spans), "
        f"RSS {bucket['frame_mb']:.0f} MB with the frame loaded, peak {bucket['rss_mb']:.0f} MB analysing"
    )
    print(f"reports identical: DuckDB vs Spark {same}, Spark cold vs warm {spark['same_warm']}")
    print(f"p95 {duck['report']['latency_ms']['p95']:.1f} ms — {duck['report']['verdict']}")


if __name__ == "__main__":
    main()
