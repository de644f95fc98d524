"""Stage 1 of the pipeline: instrument agent code with OpenTelemetry spans."""

from agentscope.sdk.decorators import agent, backoff, db, llm, queue, span, step, task, tool
from agentscope.sdk.instrumentation import Instrumentor, instrument, uninstrument
from agentscope.sdk.ratelimit import RateLimiter
from agentscope.sdk.recording import LLMCall, accept, current_llm
from agentscope.sdk.setup import flush, init, shutdown

__all__ = [
    "Instrumentor",
    "LLMCall",
    "RateLimiter",
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
