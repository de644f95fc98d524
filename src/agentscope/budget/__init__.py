"""Stage 4 of the pipeline: latency and token cost as a document procurement can read."""

from agentscope.budget.catalog import Catalog, CatalogError, FixedOption, PerTokenOption, load
from agentscope.budget.report import SCHEMA, build

__all__ = ["SCHEMA", "Catalog", "CatalogError", "FixedOption", "PerTokenOption", "build", "load"]
