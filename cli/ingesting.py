"""Ingest as the CLI shows it: a progress bar on a terminal, a summary table after."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentscope.ingest import IngestSummary, ingest
from agentscope.store import Store
from agentscope.store.shared import SharedStore


def ingest_with_progress(
    store: Store | SharedStore, paths: list[Path], console: Console, keep_content: bool = False
) -> IngestSummary:
    """Run :func:`agentscope.ingest.ingest`, with a live spans/s bar when ``console`` is a terminal."""
    if not console.is_terminal:
        return ingest(store, paths, keep_content=keep_content)
    columns = (
        SpinnerColumn(),
        TextColumn("ingesting"),
        BarColumn(bar_width=None),
        TextColumn("{task.completed:,.0f} spans"),
        TextColumn("{task.speed} spans/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingest", total=None)
        return ingest(store, paths, progress=lambda n: progress.advance(task, n), keep_content=keep_content)


def summary_table(summary: IngestSummary, store_name: str) -> Table:
    table = Table(title=f"ingested into {store_name}", title_justify="left", show_header=False, box=None)
    table.add_column(style="dim")
    table.add_column(justify="right")
    formats = ", ".join(f"{n} {fmt}" for fmt, n in sorted(summary.formats.items()))
    table.add_row("files", f"{summary.files:,}" + (f" ({formats})" if formats else ""))
    table.add_row("spans read", f"{summary.spans_read:,}")
    table.add_row("spans stored (new)", f"{summary.stored:,}")
    table.add_row("already stored", f"{summary.already_stored:,}")
    table.add_row("traces", f"{summary.traces:,}")
    table.add_row("tasks found", f"{summary.tasks:,}")
    rate = summary.spans_read / summary.seconds if summary.seconds > 0 else 0.0
    table.add_row("time", f"{summary.seconds:.2f} s ({rate:,.0f} spans/s)")
    for reason, count in summary.skipped.most_common():
        table.add_row(f"skipped: {reason}", f"{count:,}")
    return table


def print_problems(summary: IngestSummary, console: Console) -> None:
    if summary.ok:
        return
    console.print(
        f"[yellow]{summary.problem_count:,} problem(s) in the input; the good spans were kept:[/yellow]"
    )
    for problem in summary.problems:
        console.print(f"  {problem}", highlight=False, markup=False)
    if summary.problem_count > len(summary.problems):
        console.print(f"  … and {summary.problem_count - len(summary.problems):,} more")
