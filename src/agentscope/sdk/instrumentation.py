"""Auto-instrumentation: find the integrations for installed libraries and switch them on.

Integrations live outside the core (``agentscope.integrations.<library>``) and
announce themselves through the ``agentscope.instrumentors`` entry-point group,
so the core finds them without importing them, and a third-party package can
add its own.  Each is an :class:`Instrumentor`: patch on ``instrument``, undo on
``uninstrument``, do nothing when its library is not installed.

A library the application has not imported yet is patched when it is imported (a
post-import hook, as OpenTelemetry's auto-instrumentation does), so switching
every integration on imports none of their libraries: ``ags.init()`` costs an app
that never uses anthropic nothing for anthropic.
"""

from __future__ import annotations

import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import wrapt

from agentscope.sdk._safety import report

ENTRY_POINT_GROUP = "agentscope.instrumentors"


class Instrumentor(ABC):
    """Patches one third-party library; every patch can be undone.

    Subclasses set ``library`` and patch in ``_instrument`` with :meth:`wrap`,
    which records each patch so that ``uninstrument`` restores the originals.
    """

    library: str = ""
    """The importable name of the library this instrumentor patches."""

    def __init__(self) -> None:
        self.instrumented = False
        self.waiting = False
        """Whether the library will be patched when the application imports it."""
        self._hooked = False
        self._patches: list[tuple[Any, str, Any]] = []

    def available(self) -> bool:
        """Whether the library is installed (checked without importing it)."""
        return importlib.util.find_spec(self.library) is not None

    def instrument(self) -> bool:
        """Patch the library now if it is imported, else when it is; True if it is or will be patched."""
        if self.instrumented or self.waiting:
            return True
        if self.library in sys.modules:
            self._instrument()
            self.instrumented = True
            return True
        if not self.available():
            return False
        self.waiting = True
        if not self._hooked:  # a hook cannot be removed: one per instrumentor, which checks ``waiting``
            self._hooked = True
            wrapt.register_post_import_hook(self._imported, self.library)
        return True

    def _imported(self, module: Any) -> None:
        """The application imported the library: patch it, if still asked to."""
        if not self.waiting:
            return
        self.waiting = False
        try:
            self._instrument()
            self.instrumented = True
        except Exception as exc:
            report(f"instrumenting {self.library}", exc)

    def uninstrument(self) -> None:
        """Undo every patch made by :meth:`instrument` (and forget a patch still waiting for the import)."""
        self.waiting = False
        if self.instrumented:
            self._uninstrument()
            self.instrumented = False

    def wrap(self, module: str, path: str, wrapper: Callable[..., Any]) -> bool:
        """``wrapt`` ``wrapper`` around ``module.path`` (e.g. ``"Completions.create"``); False if absent."""
        try:
            target = importlib.import_module(module)
            *owners, name = path.split(".")
            owner = target
            for part in owners:
                owner = getattr(owner, part)
            original = (
                owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
            )
        except (ImportError, AttributeError, KeyError):
            return False
        wrapt.wrap_function_wrapper(owner, name, wrapper)
        self._patches.append((owner, name, original))
        return True

    @abstractmethod
    def _instrument(self) -> None: ...

    def _uninstrument(self) -> None:
        while self._patches:
            owner, name, original = self._patches.pop()
            setattr(owner, name, original)


_instrumentors: dict[str, Instrumentor] = {}


def known_instrumentors() -> dict[str, Instrumentor]:
    """Every registered instrumentor by library name, loaded once from entry points."""
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name in _instrumentors:
            continue
        try:
            _instrumentors[entry_point.name] = entry_point.load()()
        except Exception as exc:
            report(f"loading the {entry_point.name} integration", exc, internal=False)
    return dict(_instrumentors)


def instrument(*libraries: str) -> list[str]:
    """Instrument the named libraries, or every installed one; returns those instrumented now or to be
    when the application imports them."""
    registry = known_instrumentors()
    for name in libraries:
        if name not in registry:
            report(
                f"instrumenting {name}",
                LookupError(f"no agentscope integration for {name!r}; known: {sorted(registry)}"),
                internal=False,
            )
    done = []
    for name, instrumentor in registry.items():
        if libraries and name not in libraries:
            continue
        try:
            if instrumentor.instrument():
                done.append(name)
        except Exception as exc:
            report(f"instrumenting {name}", exc)
    return done


def uninstrument(*libraries: str) -> None:
    """Undo :func:`instrument` for the named libraries, or for all."""
    for name, instrumentor in _instrumentors.items():
        if not libraries or name in libraries:
            try:
                instrumentor.uninstrument()
            except Exception as exc:
                report(f"uninstrumenting {name}", exc)
