"""Where the store is by default: a light module, read by ``ags.init`` without loading the store."""

from __future__ import annotations

import os

DEFAULT_STORE = "agentscope.duckdb"
STORE_ENV = "AGENTSCOPE_STORE"


def default_store_path() -> str:
    """``$AGENTSCOPE_STORE`` if set, else ``./agentscope.duckdb``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE
