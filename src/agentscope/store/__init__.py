"""Stage 2 of the pipeline: spans kept in a local DuckDB file.

The names below load on first use (PEP 562), so that importing a light module of
this package — the SDK's store writer, the default path — does not import DuckDB
and Arrow on the application's thread.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentscope.store.paths import DEFAULT_STORE, STORE_ENV, default_store_path
    from agentscope.store.schema import COLUMN_NAMES, SCHEMA_VERSION
    from agentscope.store.store import Store, StoreError

_WHERE = {
    "COLUMN_NAMES": "agentscope.store.schema",
    "SCHEMA_VERSION": "agentscope.store.schema",
    "DEFAULT_STORE": "agentscope.store.paths",
    "STORE_ENV": "agentscope.store.paths",
    "default_store_path": "agentscope.store.paths",
    "Store": "agentscope.store.store",
    "StoreError": "agentscope.store.store",
}

__all__ = [
    "COLUMN_NAMES",
    "DEFAULT_STORE",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "Store",
    "StoreError",
    "default_store_path",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
