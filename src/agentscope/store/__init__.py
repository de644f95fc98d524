"""Stage 2 of the pipeline: spans kept in a local DuckDB file."""

from agentscope.store.schema import COLUMN_NAMES, SCHEMA_VERSION
from agentscope.store.store import DEFAULT_STORE, STORE_ENV, Store, StoreError, default_store_path

__all__ = [
    "COLUMN_NAMES",
    "DEFAULT_STORE",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "Store",
    "StoreError",
    "default_store_path",
]
