"""Auto-instrumentation: find the integrations for installed libraries and switch them on.

Integrations live outside the core (``agentscope.integrations.<library>``) and
announce themselves through the ``agentscope.instrumentors`` entry-point group,
so the core finds them without importing them, and a third-party package can
add its own.  Each is an :class:`Instrumentor`: patch on ``instrument``, undo on
``uninstrument``, do nothing when its library is not installed.
"""

from __future__ import annotations

import importlib.util
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
        self._patches: list[tuple[Any, str, Any]] = []

    def available(self) -> bool:
        """Whether the library is installed (checked without importing it)."""
        return importlib.util.find_spec(self.library) is not None

    def instrument(self) -> bool:
        """Patch the library; True if it is (now) instrumented."""
        if not self.instrumented and self.available():
            self._instrument()
            self.instrumented = True
        return self.instrumented

    def uninstrument(self) -> None:
        """Undo every patch made by :meth:`instrument`."""
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
    """Instrument the named libraries, or every installed one; returns those now instrumented."""
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
