"""Stage 2's other door: trace files others exported (OTLP JSON/protobuf, Jaeger, Zipkin) into a store."""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentscope.ingest.loader import IngestSummary, Problem, ingest
    from agentscope.ingest.sources import FORMATS, detect

__all__ = ["FORMATS", "IngestSummary", "Problem", "detect", "ingest"]

_HOMES = {
    "IngestSummary": "loader",
    "Problem": "loader",
    "ingest": "loader",
    "FORMATS": "sources",
    "detect": "sources",
}


def __getattr__(name: str) -> object:
    """The package's names, imported on first use: a command that only reads a store (``blame``,
    ``show``) does not load every trace format's reader, nor the OTLP receiver's web stack."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentscope.ingest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"agentscope.ingest.{home}"), name)
