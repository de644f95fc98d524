"""aiohttp (client): one ``http`` span per request a ``ClientSession`` sends.

``session.get(...)`` returns when the headers are in, and the body arrives as it
is read.  The span ends when the body has been received to its end (``read()``,
``text()``, ``json()``, or ``content`` read to its end), or when the response is
released or closed (leaving its ``async with``), or collected unread, so the
time spent receiving it is the request's, as with httpx and requests.  A
WebSocket handshake (``ws_connect``, status 101) ends at the handshake.  A
request's redirects are inside its one span.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from agentscope.integrations._spans import traced_async

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor

_END = "_agentscope_end"
"""The response's attribute holding its span's end, until its body is done."""


def _host(session: Any, url: Any) -> str | None:
    host = urlsplit(str(url)).hostname
    if host is None:  # a path against the session's base_url
        host = getattr(getattr(session, "_base_url", None), "host", None)
    return host


def _response_attributes(response: Any) -> dict[str, Any]:
    return {A.HTTP_RESPONSE_STATUS_CODE: getattr(response, "status", None)}


def _follow_body(response: Any, end: Callable[[BaseException | None], None]) -> None:
    """End the span when the body is done; at once if it already is (a short body arrives with the
    headers) or if there is none to come (a WebSocket's upgrade)."""
    if response.closed or response.status == 101:
        end(None)
        return
    setattr(response, _END, end)
    weakref.finalize(response, end, None)


def _end_of(response: Any) -> Callable[[BaseException | None], None] | None:
    """The span's end a response holds until its body is done, taken from it (once)."""
    fields = getattr(response, "__dict__", None)
    return fields.pop(_END, None) if isinstance(fields, dict) else None


def _body_done(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_response_eof`` (the body's last byte), ``release()`` or ``close()`` of a response."""
    try:
        return wrapped(*args, **kwargs)
    finally:
        end = _end_of(instance)
        if end is not None:
            end(None)


async def _read(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``read()`` (under ``text()`` and ``json()``): a body broken off ends the span with its error."""
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        end = _end_of(instance)
        if end is not None:
            end(exc)
        raise


async def _request(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    method = args[0] if args else kwargs.get("method")
    url = args[1] if len(args) > 1 else kwargs.get("str_or_url")
    host = _host(instance, url)
    attributes = {A.HTTP_REQUEST_METHOD: method, A.SERVER_ADDRESS: host, A.HTTP_RESEND_COUNT: 0}
    return await traced_async(
        f"{method} {host}",
        "http",
        attributes,
        lambda: wrapped(*args, **kwargs),
        _response_attributes,
        _follow_body,
    )


class AiohttpInstrumentor(Instrumentor):
    library = "aiohttp"

    def _instrument(self) -> None:
        self.wrap("aiohttp.client", "ClientSession._request", _request)
        for method in ("_response_eof", "release", "close"):
            self.wrap("aiohttp.client_reqrep", f"ClientResponse.{method}", _body_done)
        self.wrap("aiohttp.client_reqrep", "ClientResponse.read", _read)
