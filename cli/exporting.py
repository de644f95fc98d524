"""Export as the CLI shows it: a progress bar on a terminal, the manifest as a table after."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentscope.store import Store
from agentscope.store.export import Manifest, export_parquet


def export_with_progress(store: Store, out: Path, buckets: int | None, console: Console) -> Manifest:
    """Run :func:`agentscope.store.export.export_parquet`, with a spans bar when ``console`` is a terminal."""
    if not console.is_terminal:
        return export_parquet(store, out, buckets)
    columns = (
        TextColumn("exporting"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TextColumn("spans"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("export", total=None)
        return export_parquet(
            store, out, buckets, progress=lambda n, total: progress.update(task, advance=n, total=total)
        )


def export_table(manifest: Manifest, out: Path) -> Table:
    table = Table(title=f"exported to {out}", title_justify="left", show_header=False, box=None)
    table.add_column(style="dim")
    table.add_column(justify="right")
    table.add_row("spans", f"{manifest.spans:,}")
    table.add_row("traces", f"{manifest.traces:,}")
    table.add_row("buckets", f"{manifest.buckets:,} (bucket = {manifest.bucket_rule})")
    table.add_row("files", f"{manifest.files:,} Parquet, zstd, {manifest.bytes / 1e6:,.1f} MB")
    return table
