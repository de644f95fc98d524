"""httpx (sync and async clients): one ``http`` span per request sent.

Under an LLM call, these spans are that call's transport (the analyzer splits
them like the call), so they are never counted twice.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _send(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    request = args[0] if args else kwargs.get("request")
    attributes = request_attributes(request)
    return traced(
        f"{attributes[A.HTTP_REQUEST_METHOD]} {attributes[A.SERVER_ADDRESS]}",
        "http",
        attributes,
        lambda: wrapped(*args, **kwargs),
        response_attributes,
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
    )


class HTTPXInstrumentor(Instrumentor):
    library = "httpx"

    def _instrument(self) -> None:
        self.wrap("httpx", "Client.send", _send)
        self.wrap("httpx", "AsyncClient.send", _send_async)
