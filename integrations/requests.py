"""requests: one ``http`` span per request a Session sends.

A streamed response (``stream=True``) keeps its span open until its body is
read to the end (``iter_content``, ``raw.read``), closed or its connection
released, so the time spent receiving it is the request's, not its caller's.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

from agentscope.integrations._spans import traced
from agentscope.integrations.httpx import response_attributes

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor


@functools.cache
def _raw_type() -> type:
    """A proxy of urllib3's response (``response.raw``) that ends the request's span with the body."""
    import wrapt

    class Raw(wrapt.ObjectProxy):
        def __init__(self, raw: Any, end: Callable[[BaseException | None], None]) -> None:
            super().__init__(raw)
            self._self_end = end

        def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
            try:
                yield from self.__wrapped__.stream(*args, **kwargs)
            except GeneratorExit:  # the reader stopped early; closing the response ends the span
                raise
            except BaseException as exc:
                self._self_end(exc)
                raise
            self._self_end(None)

        def read(self, amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
            try:
                data = self.__wrapped__.read(amt, *args, **kwargs)
            except BaseException as exc:
                self._self_end(exc)
                raise
            if not data and amt != 0:
                self._self_end(None)
            return data

        def close(self) -> None:
            try:
                self.__wrapped__.close()
            finally:
                self._self_end(None)

        def release_conn(self) -> None:
            try:
                self.__wrapped__.release_conn()
            finally:
                self._self_end(None)

    return Raw


def _follow_body(response: Any, end: Callable[[BaseException | None], None]) -> None:
    """End the request's span with its streamed body: read to its end, closed, or collected unread."""
    response.raw = _raw_type()(response.raw, end)
    weakref.finalize(response, end, None)


def _send(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    request = args[0] if args else kwargs.get("request")
    host = urlparse(getattr(request, "url", "") or "").hostname
    method = getattr(request, "method", None)
    attributes = {A.HTTP_REQUEST_METHOD: method, A.SERVER_ADDRESS: host, A.HTTP_RESEND_COUNT: 0}
    return traced(
        f"{method} {host}",
        "http",
        attributes,
        lambda: wrapped(*args, **kwargs),
        response_attributes,
        _follow_body if kwargs.get("stream") else None,
    )


class RequestsInstrumentor(Instrumentor):
    library = "requests"

    def _instrument(self) -> None:
        self.wrap("requests.sessions", "Session.send", _send)
