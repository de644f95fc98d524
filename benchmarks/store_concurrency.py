"""One store, many processes: spans/s stored with 1, 2 and 4 writer processes, and what a reader waits.

    python benchmarks/store_concurrency.py [--tasks 20000] [--writers 1 2 4]

Each writer process is an instrumented app (``ags.init(store=...)``) running
``--tasks`` tasks of four spans shaped like real SDK output: a task, an LLM call
with model, provider, token counts, finish reasons and server timings, a tool
with a call id, and a database query with its conventions' keys.  The clock runs
from the first process's start to the last one's exit (so it includes every
flush, every wait for the file and the final write at shutdown); the stored
count is checked against what was produced.  While the writers run, this
process opens read snapshots in a loop (``SharedStore.reading``) and times how
long each took to be ready: the lock wait plus the copy.  The same reads are
timed once more on the idle store.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from agentscope.store.schema import rows_to_table
from agentscope.store.shared import SharedStore

SPANS_PER_TASK = 4


def app(store: str, tasks: int, worker: int) -> None:
    import agentscope as ags

    ags.init(service_name=f"support-agent-{worker}", store=store, instrument=False)
    llm_attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "groq",
        "gen_ai.request.model": "openai/gpt-oss-120b",
        "gen_ai.response.model": "openai/gpt-oss-120b",
        "gen_ai.usage.input_tokens": 1834,
        "gen_ai.usage.output_tokens": 212,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.response.id": "chatcmpl-8f1d2c9a6b7e4d3f9a0b1c2d",
        "agentscope.llm.server.queue_ms": 12.5,
        "agentscope.llm.server.prefill_ms": 48.1,
        "agentscope.llm.server.decode_ms": 402.7,
    }
    for i in range(tasks):
        with ags.span("resolve_ticket", kind="task", **{"agentscope.task.name": "resolve_ticket"}):
            with ags.span("chat openai/gpt-oss-120b", kind="llm", **llm_attributes):
                pass
            with ags.span(
                "execute_tool search_kb",
                kind="tool",
                **{"gen_ai.tool.name": "search_kb", "gen_ai.tool.call.id": f"call_{worker}_{i:08d}"},
            ):
                pass
            with ags.span(
                "SELECT orders",
                kind="db",
                **{
                    "db.system.name": "postgresql",
                    "db.operation.name": "SELECT",
                    "db.collection.name": "orders",
                    "server.address": "127.0.0.1",
                },
            ):
                pass
    ags.shutdown()


def read_waits(shared: SharedStore, until: float | None, rounds: int = 0) -> list[float]:
    """Seconds each snapshot took to be ready, reading in a loop until ``until`` (or ``rounds`` times)."""
    waits: list[float] = []
    while (until is not None and time.monotonic() < until) or len(waits) < rounds:
        if not shared.path.exists():
            time.sleep(0.01)
            continue
        started = time.perf_counter()
        with shared.reading() as store:
            waits.append(time.perf_counter() - started)
            store.span_count()
        time.sleep(0.05)
        if until is None and len(waits) >= rounds:
            break
    return waits


def run(writers: int, tasks: int) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="agentscope-concurrency-") as folder:
        path = Path(folder) / "shared.duckdb"
        shared = SharedStore(path)
        started = time.perf_counter()
        processes = [context.Process(target=app, args=(str(path), tasks, n)) for n in range(writers)]
        for process in processes:
            process.start()
        waits: list[float] = []
        while any(p.is_alive() for p in processes):
            waits += read_waits(shared, time.monotonic() + 0.5)
        for process in processes:
            process.join()
        elapsed = time.perf_counter() - started
        shared.insert(rows_to_table([]))  # a last write loads anything spilled
        with shared.reading() as store:
            stored = store.span_count()
        idle = read_waits(shared, None, rounds=10)
        size_mb = path.stat().st_size / 1e6
    produced = writers * tasks * SPANS_PER_TASK
    assert stored == produced, f"{stored} stored of {produced}"
    ordered = sorted(waits) or [0.0]
    return {
        "writers": writers,
        "spans": produced,
        "seconds": elapsed,
        "spans_per_s": produced / elapsed,
        "reads": len(waits),
        "wait_median_ms": statistics.median(ordered) * 1000,
        "wait_p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000,
        "idle_median_ms": statistics.median(idle) * 1000,
        "store_mb": size_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per writer process (4 spans each)")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    print(
        "| writer processes | spans | seconds | spans/s stored | vs 1 writer | reads "
        "| reader wait median | p95 | idle read | store |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for writers in args.writers:
        row = run(writers, args.tasks)
        base = base or row["spans_per_s"]
        print(
            f"| {writers} | {row['spans']:,} | {row['seconds']:.1f} | {row['spans_per_s']:,.0f} | "
            f"{row['spans_per_s'] / base:.2f} | {row['reads']} | {row['wait_median_ms']:.0f} ms | "
            f"{row['wait_p95_ms']:.0f} ms | {row['idle_median_ms']:.0f} ms | {row['store_mb']:.0f} MB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
