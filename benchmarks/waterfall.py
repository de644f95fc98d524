"""One task's waterfall in `agentscope ui`, in headless Chromium: drawn as it is (1,500 rows at most) and
every span drawn (``?all_spans=1``, what the page drew before), side by side on the same trace.

    python benchmarks/waterfall.py [--spans 3000 30000] [--rounds 3]

A long session: one task holding ``--spans`` tool calls one after another (every one on the critical
path), then a model call.  Each round opens the trace page afresh in both ways, in turn, and times it
from navigation to the page drawn (the two API answers, the JSON parsed, the rows laid out); the
table gives medians.  Needs Chromium (Debian's ``chromium``) and Playwright (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from clirun import serving
from tracebuild import store_row

from agentscope.sim.server import free_port
from agentscope.store import Store
from agentscope.store.schema import rows_to_table

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TRACE = f"{0xB16:032x}"


def long_session(path: Path, spans: int) -> None:
    base = 1_700_000_000_000
    end = base + spans * 0.1
    rows = [
        store_row(TRACE, "root", None, "task", base, end + 500, "session", **{"agentscope.task.name": "s"})
    ]
    rows += [
        store_row(TRACE, f"t{i}", "root", "tool", base + i * 0.1, base + i * 0.1 + 0.08, f"tool {i % 7}")
        for i in range(spans)
    ]
    rows.append(
        store_row(TRACE, "llm", "root", "llm", end, end + 500, "chat", **{"gen_ai.request.model": "x"})
    )
    with Store(path) as store:
        store.insert(rows_to_table(rows))


def drawn_in(page, url: str) -> tuple[float, int]:
    """Seconds from navigation to the page drawn, and the rows drawn."""
    page.goto("about:blank")
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(
        "() => document.body.dataset.loading === '0'"
        " && (document.body.dataset.rendered || '').startsWith('#/trace')",
        timeout=300_000,
    )
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    return time.perf_counter() - started, page.eval_on_selector_all(
        "#waterfall .span-row", "rows => rows.length"
    )


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, nargs="+", default=[3000, 30000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| spans | drawn as it is: rows | seconds | every span: rows | seconds | × every span |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for spans in args.spans:
            path = Path(folder) / f"session-{spans}.duckdb"
            long_session(path, spans)
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            server = serving("ui", "--store", str(path), "--port", str(port), ready=base + "/api/overview")
            try:
                page = browser.new_page(viewport={"width": 1360, "height": 900})
                drawn_in(page, f"{base}/#/trace/{TRACE}")  # the server's first analysis of the trace
                capped, every = [], []
                for _ in range(args.rounds):
                    capped.append(drawn_in(page, f"{base}/#/trace/{TRACE}"))
                    every.append(drawn_in(page, f"{base}/#/trace/{TRACE}?all_spans=1"))
                page.close()
            finally:
                server.terminate()
                server.wait(timeout=30)
            a = statistics.median(s for s, _ in capped)
            b = statistics.median(s for s, _ in every)
            print(
                f"| {spans:,} | {capped[0][1]:,} | {a:.2f} | {every[0][1]:,} | {b:.2f} | {a / b:.2f} |",
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
