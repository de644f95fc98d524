"""agentscope: where does an agent's p95 go, and would faster inference help?

Instrument agent code with the decorators below, keep the spans in a local
DuckDB store, then ask ``agentscope blame`` which categories the tail is made
of.  See docs/api.md for every public name.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentscope.sdk import (
        Instrumentor,
        LLMCall,
        RateLimiter,
        accept,
        agent,
        backoff,
        current_llm,
        db,
        flush,
        init,
        instrument,
        llm,
        queue,
        shutdown,
        span,
        step,
        task,
        tool,
        uninstrument,
    )


def __getattr__(name: str) -> object:
    """The SDK's names, imported on first use: the analysis and the store (a blame worker, a Spark
    executor) import this package without paying for OpenTelemetry's SDK."""
    if name in __all__:
        from agentscope import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'agentscope' has no attribute {name!r}")


__all__ = [
    "Instrumentor",
    "LLMCall",
    "RateLimiter",
    "__version__",
    "accept",
    "agent",
    "backoff",
    "current_llm",
    "db",
    "flush",
    "init",
    "instrument",
    "llm",
    "queue",
    "shutdown",
    "span",
    "step",
    "task",
    "tool",
    "uninstrument",
]
