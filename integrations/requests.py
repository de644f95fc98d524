"""requests: one ``http`` span per request a Session sends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from agentscope.integrations._spans import traced
from agentscope.integrations.httpx import response_attributes

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor


def _send(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    request = args[0] if args else kwargs.get("request")
    host = urlparse(getattr(request, "url", "") or "").hostname
    method = getattr(request, "method", None)
    attributes = {A.HTTP_REQUEST_METHOD: method, A.SERVER_ADDRESS: host, A.HTTP_RESEND_COUNT: 0}
    return traced(
        f"{method} {host}", "http", attributes, lambda: wrapped(*args, **kwargs), response_attributes
    )


class RequestsInstrumentor(Instrumentor):
    library = "requests"

    def _instrument(self) -> None:
        self.wrap("requests.sessions", "Session.send", _send)
