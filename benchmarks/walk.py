"""The walk alone: a worker's analysis of batches of a store, µs a span, one tree against another.

    python benchmarks/walk.py --store STORE [--batches 4] [--rounds 5] [--tree SRC ...]

A first read spends most of the machine in its workers' walk (``analysis.rows.analyze_rows``
with every kept what-if: trees, repairs, critical paths, mixes, the what-if simulation and the
rows), and the whole process moves with this machine's speed by more than a change to the walk.
So this times the walk on its own: the first ``--batches`` batches of the store (as a first read
cuts them) are read once, then analysed three times in one process, and the best of the three is
the round's figure.  Each ``--tree`` (a package tree, e.g. ``src`` of a worktree of the previous
release) is put first on ``PYTHONPATH`` for its process, and the trees take turns, ``--rounds``
times; the table gives each one's median and its ratio to the first tree's.  Without ``--tree``,
the installed package is timed.

A store of rich spans: ``incremental.py --traces 50000 --repeat 1 --ui-seconds 0 --work DIR``
keeps one as ``DIR/rich-50000.duckdb``; ``sdk_store.py --out STORE`` writes one of the spans
agentscope's own SDK records (CPU times on every step, server timings, retries).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ONE_ROUND = """
import sys, time
from itertools import islice
from agentscope.analysis.pipeline import ROW_VARIANTS
from agentscope.analysis.rows import analyze_rows
from agentscope.store import Store
from agentscope.store.query import span_batches

with Store(sys.argv[1], read_only=True) as store:
    batches = list(islice(span_batches(store), int(sys.argv[2])))
spans = sum(batch.num_rows for batch in batches)
times = []
for _ in range(3):
    began = time.perf_counter()
    for batch in batches:
        analyze_rows(batch, ROW_VARIANTS, repair=True)
    times.append(time.perf_counter() - began)
print(min(times) / spans * 1e6, spans)
"""


def one_round(tree: str | None, store: str, batches: int) -> tuple[float, int]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", ONE_ROUND, store, str(batches)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    per_span, spans = done.stdout.split()
    return float(per_span), int(spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a store of rich spans (see the docstring)")
    parser.add_argument("--batches", type=int, default=4, help="batches of about 50,000 spans each")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", action="append", help="a package tree to put first on PYTHONPATH")
    args = parser.parse_args()
    trees = args.tree or [None]
    figures: dict[str | None, list[float]] = {tree: [] for tree in trees}
    spans = 0
    for _ in range(args.rounds):
        for tree in trees:
            per_span, spans = one_round(tree, args.store, args.batches)
            figures[tree].append(per_span)
    first = statistics.median(figures[trees[0]])
    print(f"the walk with every kept what-if, {spans:,} rich spans, best of 3 a round, {args.rounds} rounds")
    print("| tree | µs a span, median | fastest round | × the first |")
    print("|---|---:|---:|---:|")
    for tree, values in figures.items():
        median = statistics.median(values)
        print(f"| {tree or 'installed'} | {median:.2f} | {min(values):.2f} | {median / first:.3f} |")


if __name__ == "__main__":
    main()
