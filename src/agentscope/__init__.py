"""agentscope: where does an agent's p95 go, and would faster inference help?

Instrument agent code with the decorators below, keep the spans in a local
DuckDB store, then ask ``agentscope blame`` which categories the tail is made
of.  See docs/api.md for every public name.
"""

__version__ = "0.1.0"

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
