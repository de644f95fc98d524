"""Stage 3 of the pipeline: critical path, category attribution, budget and what-if.

``analyze`` (a batch of whole traces → one ``TaskResult`` per task) is the pure
core; ``report.blame`` aggregates task results into the blame report.
"""

from agentscope.analysis.batch import COLUMNS, SpanBatch
from agentscope.analysis.categories import CATEGORIES, COMPONENTS, KEYS
from agentscope.analysis.tasks import TaskResult, analyze, explain
from agentscope.analysis.whatif import Scenario

__all__ = [
    "CATEGORIES",
    "COLUMNS",
    "COMPONENTS",
    "KEYS",
    "Scenario",
    "SpanBatch",
    "TaskResult",
    "analyze",
    "explain",
]
