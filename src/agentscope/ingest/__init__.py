"""Stage 2's other door: trace files others exported (OTLP JSON/protobuf, Jaeger, Zipkin) into a store."""

from agentscope.ingest.loader import IngestSummary, Problem, ingest
from agentscope.ingest.sources import FORMATS, detect

__all__ = ["FORMATS", "IngestSummary", "Problem", "detect", "ingest"]
