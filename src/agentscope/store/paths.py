"""Where the store is by default, and where Parquet is: a light module, read by ``ags.init`` without
loading the store."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_STORE = "agentscope.duckdb"
STORE_ENV = "AGENTSCOPE_STORE"
MANIFEST = "_agentscope_manifest.json"
"""What an export writes beside its Parquet files (``agentscope export``)."""
TASKS_SCHEMA = "agentscope.tasks/v1"
"""The manifest's ``schema`` of a task table export; any other manifest is of spans."""


def default_store_path() -> str:
    """``$AGENTSCOPE_STORE`` if set, else ``./agentscope.duckdb``; a leading ``~`` is the home folder (a
    variable from a ``.env`` file or a container's environment is not expanded by a shell)."""
    return os.path.expanduser(os.environ.get(STORE_ENV) or DEFAULT_STORE)


def holds_parquet(folder: Path) -> bool:
    """Whether a folder has a Parquet file anywhere under it (an export's, a task table's)."""
    return next(folder.rglob("*.parquet"), None) is not None


def export_reader(folder: Path) -> str | None:
    """What an agentscope export in ``folder`` is and the command that reads it (None: no export
    there), for where a folder of trace files was expected."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(manifest, dict) and manifest.get("schema") == TASKS_SCHEMA:
        return f"a task table agentscope exported: read it with `agentscope blame --tasks {folder}`"
    return (
        f"spans agentscope exported as Parquet: analyse them with `agentscope blame --engine spark {folder}`"
    )
