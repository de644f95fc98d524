"""The decorators and context managers users put on their own agent code.

Each decorator works bare (``@ags.tool``) or with arguments
(``@ags.tool("search_kb")``), on sync and async functions, generators and async
generators, methods, staticmethods and classmethods.  The wrapper is a
``wrapt.FunctionWrapper``, so signatures, ``inspect`` and method binding behave
as on the undecorated function.  wrapt is imported at the first decoration, not
with the package: ``ags.init()`` alone does not pay its ~50 ms.
"""

from __future__ import annotations

import copy
import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentscope import attributes as A
from agentscope.classify import KINDS
from agentscope.sdk.recording import Recording, clean_attributes, start, with_kind
from agentscope.sdk.wrappers import Spec, call, call_async, call_async_generator, call_generator

F = TypeVar("F", bound=Callable[..., Any])


def _target(fn: Any) -> Callable:
    """The plain function behind a staticmethod/classmethod object."""
    return getattr(fn, "__func__", fn)


def _name_of(fn: Any) -> str:
    """The span name a callable gives by default: its ``__name__``; a ``functools.partial``'s function's;
    else its type's (a callable object)."""
    target = _target(fn)
    while isinstance(target, functools.partial):
        target = target.func
    return getattr(target, "__name__", None) or type(target).__name__


def _wrap(fn: F, spec: Spec) -> F:
    target = _target(fn)
    if not (inspect.isroutine(target) or inspect.isclass(target) or isinstance(target, functools.partial)):
        target = target.__call__  # a callable object: its call says what it is (async, a generator)
    if inspect.isasyncgenfunction(target):
        runner = call_async_generator
    elif inspect.iscoroutinefunction(target):
        runner = call_async
    elif inspect.isgeneratorfunction(target):
        runner = call_generator
    else:
        runner = call
    return _wrapper_type()(fn, functools.partial(runner, spec))  # type: ignore[return-value]


@functools.cache
def _wrapper_type() -> type:
    """``wrapt.FunctionWrapper`` that pickles and copies as the undecorated function does.

    wrapt's proxies refuse pickling and copying, and multiprocessing pickles the function a child runs
    (``Pool.map(task, ...)``, ``ProcessPoolExecutor.submit``): a function pickles by its module and name,
    a method as its object (or class) and name; copies of a function are the function itself.
    """
    import wrapt

    class BoundTraced(wrapt.BoundFunctionWrapper):
        def __reduce_ex__(self, protocol: object) -> object:
            # wrapt before 2.0 keeps no owner: a method taken from its class then pickles by name
            holder = (
                self._self_instance if self._self_instance is not None else getattr(self, "_self_owner", None)
            )
            return self.__qualname__ if holder is None else (getattr, (holder, self.__name__))

        def __copy__(self) -> object:
            return self

        def __deepcopy__(self, memo: dict) -> object:
            if self._self_instance is None:
                return self
            return getattr(copy.deepcopy(self._self_instance, memo), self.__name__)

    class Traced(wrapt.FunctionWrapper):
        __bound_function_wrapper__ = BoundTraced

        def __reduce_ex__(self, protocol: object) -> object:
            return self.__qualname__

        def __copy__(self) -> object:
            return self

        def __deepcopy__(self, memo: dict) -> object:
            return self

    return Traced


def _decorator(kind: str, build: Callable[[str, dict[str, Any]], tuple[str, dict[str, Any]]]) -> Callable:
    """A decorator factory that accepts ``@d``, ``@d("name")`` and ``@d(name=..., **options)``."""

    def decorator(name_or_fn: Any = None, /, **options: Any) -> Any:
        if callable(name_or_fn) or isinstance(name_or_fn, (staticmethod, classmethod)):
            fn = name_or_fn
            span_name, attributes = build(_name_of(fn), options)
            return _wrap(fn, Spec(span_name, kind, attributes))

        def apply(fn: F) -> F:
            name = name_or_fn or options.get("name") or _name_of(fn)
            span_name, attributes = build(name, options)
            return _wrap(fn, Spec(span_name, kind, attributes))

        return apply

    decorator.__name__ = kind
    return decorator


def _task(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return name, {A.TASK_NAME: name}


def _agent(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{A.OPERATION_INVOKE_AGENT} {name}", {
        A.GEN_AI_OPERATION_NAME: A.OPERATION_INVOKE_AGENT,
        A.GEN_AI_AGENT_NAME: name,
    }


def _tool(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{A.OPERATION_EXECUTE_TOOL} {name}", {
        A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: name,
    }


def _step(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return name, {A.STEP_NAME: name}


def _db(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    system = options.get("system") or "other_sql"
    operation = options.get("operation") or name
    return f"{operation} {system}", {A.DB_SYSTEM_NAME: system, A.DB_OPERATION_NAME: operation}


def _llm(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    operation = options.get("operation") or A.OPERATION_CHAT
    model = options.get("model")
    attributes: dict[str, Any] = {A.GEN_AI_OPERATION_NAME: operation}
    if model:
        attributes[A.GEN_AI_REQUEST_MODEL] = model
    if options.get("provider"):
        attributes[A.GEN_AI_PROVIDER_NAME] = options["provider"]
    return (f"{operation} {model}" if model else name), attributes


task = _decorator("task", _task)
task.__doc__ = """Mark a function as one task: the unit whose latency blame and budget report."""
agent = _decorator("agent", _agent)
agent.__doc__ = """Mark an agent invocation (``gen_ai.operation.name=invoke_agent``)."""
tool = _decorator("tool", _tool)
tool.__doc__ = """Mark a tool call (``execute_tool``); its own time is blamed on ``tool``."""
step = _decorator("step", _step)
step.__doc__ = """Mark an orchestration step; its own time is split into ``cpu`` and ``other``."""
db = _decorator("db", _db)
db.__doc__ = """Mark a database call: ``@ags.db(system="postgresql", operation="SELECT")``."""
llm = _decorator("llm", _llm)
llm.__doc__ = """Mark an LLM call: ``@ags.llm(model="gpt-oss-120b", provider="groq")``.

Inside it, :func:`agentscope.current_llm` returns the call's handle.  A generator
function is treated as a stream: its first item marks the first token unless the
handle was marked earlier.
"""


class span:
    """A span around a block: ``with ags.span("plan"): ...`` (also ``async with``).

    CPU is measured with the thread's clock between enter and exit; in async code
    that also counts other coroutines that ran while the block awaited, so prefer
    decorating a coroutine when its CPU matters.
    """

    __slots__ = ("_attributes", "_cpu0", "_kind", "_name", "_rec")

    def __init__(self, name: str, kind: str = "step", **attributes: Any) -> None:
        self._name = name
        self._kind = kind if kind in KINDS else "step"
        self._attributes = with_kind(self._kind, clean_attributes(attributes))
        self._rec: Recording | None = None
        self._cpu0 = 0

    def __enter__(self) -> span:
        self._rec = start(self._name, self._kind, self._attributes)
        if self._rec is not None:
            self._rec.enter()
            self._cpu0 = time.thread_time_ns()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        rec = self._rec
        if rec is not None:
            rec.finish(exc, time.thread_time_ns() - self._cpu0)
            rec.exit()
            self._rec = None

    async def __aenter__(self) -> span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def set_attribute(self, key: str, value: Any) -> None:
        """Add an attribute to the open span (ignored when tracing is off)."""
        if self._rec is not None:
            self._rec.span.set_attributes(clean_attributes({key: value}))


def queue(name: str, **attributes: Any) -> span:
    """A client-side wait for capacity (rate limiter, semaphore, pool): blamed on ``queue.client``."""
    return span(f"queue {name}", kind="queue", **{A.QUEUE_NAME: name, **attributes})


def backoff(planned_s: float | None = None, attempt: int | None = None) -> span:
    """Sleeping before a retry: blamed on ``retry.backoff``."""
    attributes: dict[str, Any] = {}
    if planned_s is not None:
        attributes[A.BACKOFF_PLANNED_S] = float(planned_s)
    if attempt is not None:
        attributes[A.ATTEMPT] = int(attempt)
    return span("backoff", kind="backoff", **attributes)
