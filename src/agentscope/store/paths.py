"""Where the store is by default, and where Parquet is: a light module, read by ``ags.init`` without
loading the store."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_STORE = "agentscope.duckdb"
STORE_ENV = "AGENTSCOPE_STORE"


def default_store_path() -> str:
    """``$AGENTSCOPE_STORE`` if set, else ``./agentscope.duckdb``; a leading ``~`` is the home folder (a
    variable from a ``.env`` file or a container's environment is not expanded by a shell)."""
    return os.path.expanduser(os.environ.get(STORE_ENV) or DEFAULT_STORE)


def holds_parquet(folder: Path) -> bool:
    """Whether a folder has a Parquet file anywhere under it (an export's, a task table's)."""
    return next(folder.rglob("*.parquet"), None) is not None
