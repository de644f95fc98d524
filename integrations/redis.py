"""redis-py: one ``db`` span per command (sync and asyncio clients) and per pipeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.integrations._spans import traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor


def _attributes(command: Any) -> dict[str, Any]:
    operation = command.decode() if isinstance(command, bytes) else str(command)
    return {A.DB_SYSTEM_NAME: "redis", A.DB_OPERATION_NAME: operation.upper()}


def _command(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = _attributes(args[0] if args else "COMMAND")
    return traced(
        f"{attributes[A.DB_OPERATION_NAME]} redis", "db", attributes, lambda: wrapped(*args, **kwargs)
    )


async def _command_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = _attributes(args[0] if args else "COMMAND")
    call = lambda: wrapped(*args, **kwargs)  # noqa: E731
    return await traced_async(f"{attributes[A.DB_OPERATION_NAME]} redis", "db", attributes, call)


def _pipeline(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = _attributes("PIPELINE")
    return traced("PIPELINE redis", "db", attributes, lambda: wrapped(*args, **kwargs))


async def _pipeline_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = _attributes("PIPELINE")
    return await traced_async("PIPELINE redis", "db", attributes, lambda: wrapped(*args, **kwargs))


class RedisInstrumentor(Instrumentor):
    library = "redis"

    def _instrument(self) -> None:
        self.wrap("redis.client", "Redis.execute_command", _command)
        self.wrap("redis.client", "Pipeline.execute", _pipeline)
        self.wrap("redis.asyncio.client", "Redis.execute_command", _command_async)
        self.wrap("redis.asyncio.client", "Pipeline.execute", _pipeline_async)
