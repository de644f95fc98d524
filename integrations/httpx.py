"""httpx (sync and async clients): one ``http`` span per request sent.

A streamed response (``client.stream(...)``, ``send(..., stream=True)``) keeps
its span open until its body is read to the end or closed, so the time spent
receiving it is the request's, not its caller's (SSE, downloads, MCP's
streamable HTTP).  Under an LLM call, these spans are that call's transport
(the analyzer splits them like the call), so they are never counted twice.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from agentscope.integrations._spans import traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor


def request_attributes(request: Any) -> dict[str, Any]:
    url = getattr(request, "url", None)
    return {
        A.HTTP_REQUEST_METHOD: getattr(request, "method", None),
        A.SERVER_ADDRESS: getattr(url, "host", None),
        A.HTTP_RESEND_COUNT: 0,
    }


def response_attributes(response: Any) -> dict[str, Any]:
    return {A.HTTP_RESPONSE_STATUS_CODE: getattr(response, "status_code", None)}


@functools.cache
def _body_types() -> tuple[type, type]:
    """The byte streams that stand in for a streamed response's body (httpx's own types, which its
    ``Response`` checks for), made once httpx is imported."""
    import httpx

    class Body(httpx.SyncByteStream):
        def __init__(self, inner: Any, end: Callable[[BaseException | None], None]) -> None:
            self._inner, self._end = inner, end

        def __iter__(self) -> Iterator[bytes]:
            try:
                yield from self._inner
            except GeneratorExit:  # the reader stopped early; its close() ends the span
                raise
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._end(None)

    class AsyncBody(httpx.AsyncByteStream):
        def __init__(self, inner: Any, end: Callable[[BaseException | None], None]) -> None:
            self._inner, self._end = inner, end

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._end(None)

    return Body, AsyncBody


def _follow_body(response: Any, end: Callable[[BaseException | None], None]) -> None:
    """End the request's span with its streamed body: read to its end, closed, or collected unread."""
    import httpx

    body, async_body = _body_types()
    stream = response.stream
    wrapper = async_body if isinstance(stream, httpx.AsyncByteStream) else body
    response.stream = wrapper(stream, end)
    weakref.finalize(response, end, None)


def _send(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    request = args[0] if args else kwargs.get("request")
    attributes = request_attributes(request)
    return traced(
        f"{attributes[A.HTTP_REQUEST_METHOD]} {attributes[A.SERVER_ADDRESS]}",
        "http",
        attributes,
        lambda: wrapped(*args, **kwargs),
        response_attributes,
        _follow_body if kwargs.get("stream") else None,
    )


async def _send_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    request = args[0] if args else kwargs.get("request")
    attributes = request_attributes(request)
    return await traced_async(
        f"{attributes[A.HTTP_REQUEST_METHOD]} {attributes[A.SERVER_ADDRESS]}",
        "http",
        attributes,
        lambda: wrapped(*args, **kwargs),
        response_attributes,
        _follow_body if kwargs.get("stream") else None,
    )


class HTTPXInstrumentor(Instrumentor):
    library = "httpx"

    def _instrument(self) -> None:
        self.wrap("httpx", "Client.send", _send)
        self.wrap("httpx", "AsyncClient.send", _send_async)
