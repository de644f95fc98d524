"""Auto-instrumentation: switch on the integrations for installed libraries.

Integrations live outside the core (``agentscope.integrations.<library>``).  The
core names the built-in ones in :data:`BUILTIN` without importing them, and a
third-party package can add its own under the ``agentscope.instrumentors``
entry-point group (enabled when named: ``ags.instrument("mylib")``; reading the
installed packages' entry points costs ~25 ms, which ``ags.init()`` does not
spend).  Each is an :class:`Instrumentor`: patch on ``instrument``, undo on
``uninstrument``, do nothing when its library is not installed.

A library the application has not imported yet is patched when it is imported (a
post-import hook, as OpenTelemetry's auto-instrumentation does), and its
integration module loads only then: ``ags.init()`` costs an app that never uses
anthropic nothing for anthropic.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agentscope.sdk._safety import report
from agentscope.sdk.import_hooks import when_imported

ENTRY_POINT_GROUP = "agentscope.instrumentors"

BUILTIN: dict[str, str] = {
    library: f"agentscope.integrations.{library}:{cls}Instrumentor"
    for library, cls in (
        ("openai", "OpenAI"),
        ("anthropic", "Anthropic"),
        ("litellm", "LiteLLM"),
        ("httpx", "HTTPX"),
        ("requests", "Requests"),
        ("aiohttp", "Aiohttp"),
        ("sqlite3", "SQLite3"),
        ("psycopg", "Psycopg"),
        ("redis", "Redis"),
        ("tenacity", "Tenacity"),
        ("duckdb", "DuckDB"),
        ("sqlalchemy", "SQLAlchemy"),
        ("backoff", "Backoff"),
    )
}
"""The integrations agentscope ships, by the library each patches (the integration's name)."""


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
        self._epoch = 0
        """Counts ``uninstrument`` calls: a patch still waiting for its module's import from an earlier
        ``instrument`` is dropped."""

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
            when_imported(self.library, self._imported)
        return True

    def _imported(self, module: ModuleType) -> None:
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
        self._epoch += 1
        if self.instrumented:
            self._uninstrument()
            self.instrumented = False

    def wrap(self, module: str, path: str, wrapper: Callable[..., Any]) -> None:
        """``wrapt`` ``wrapper`` around ``module.path`` (e.g. ``"Completions.create"``).

        A module the application has not imported yet is patched when it is: an SDK's parts the app
        never uses (openai's Responses stream helpers: ~100 ms of imports) stay unloaded.  A path the
        module lacks (another version of the library) is skipped.
        """
        loaded = sys.modules.get(module)
        if loaded is not None:
            self._wrap_now(loaded, path, wrapper)
            return
        epoch = self._epoch
        when_imported(module, lambda loaded: self._epoch == epoch and self._wrap_now(loaded, path, wrapper))

    def _wrap_now(self, module: ModuleType, path: str, wrapper: Callable[..., Any]) -> bool:
        try:
            *owners, name = path.split(".")
            owner: Any = module
            for part in owners:
                owner = getattr(owner, part)
            original = (
                owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
            )
        except (AttributeError, KeyError):
            return False
        import wrapt  # here, not at the top: wrapt costs start-up, and patching happens after it

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
"""The integrations loaded so far, by name."""
_waiting: set[str] = set()
"""Built-in integrations to load and switch on when the application imports their library."""
_hooked: set[str] = set()


def _plugins() -> dict[str, str]:
    """Third-party integrations: the ``agentscope.instrumentors`` entry points, by name."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN}


def _load(name: str, target: str) -> Instrumentor | None:
    """The integration ``name`` (``"module:Class"``), imported and made once."""
    if name not in _instrumentors:
        module, _, attribute = target.partition(":")
        try:
            _instrumentors[name] = getattr(importlib.import_module(module), attribute)()
        except Exception as exc:
            report(f"loading the {name} integration", exc, internal=False)
            return None
    return _instrumentors[name]


def _switch_on(name: str, target: str) -> bool:
    instrumentor = _load(name, target)
    return instrumentor is not None and instrumentor.instrument()


def _library_imported(module: ModuleType) -> None:
    """A built-in integration's library was imported: load the integration and patch it, if still asked."""
    name = module.__name__
    if name in _waiting:
        _waiting.discard(name)
        try:
            _switch_on(name, BUILTIN[name])
        except Exception as exc:
            report(f"instrumenting {name}", exc)


def _instrument_builtin(name: str) -> bool:
    if name in sys.modules or name in _instrumentors:
        return _switch_on(name, BUILTIN[name])
    if importlib.util.find_spec(name) is None:
        return False
    _waiting.add(name)
    if name not in _hooked:  # a hook runs once; one per library, which checks ``_waiting``
        _hooked.add(name)
        when_imported(name, _library_imported)
    return True


def instrument(*libraries: str) -> list[str]:
    """Instrument the named libraries, or every installed one agentscope ships an integration for;
    returns those instrumented now or to be when the application imports them.

    A third-party integration (an ``agentscope.instrumentors`` entry point) is switched on by name.
    """
    plugins = _plugins() if any(name not in BUILTIN for name in libraries) else {}
    done = []
    for name in libraries or tuple(BUILTIN):
        if name not in BUILTIN and name not in plugins:
            known = sorted({*BUILTIN, *plugins})
            report(
                f"instrumenting {name}",
                LookupError(f"no agentscope integration for {name!r}; known: {known}"),
                internal=False,
            )
            continue
        try:
            if _instrument_builtin(name) if name in BUILTIN else _switch_on(name, plugins[name]):
                done.append(name)
        except Exception as exc:
            report(f"instrumenting {name}", exc)
    return done


def uninstrument(*libraries: str) -> None:
    """Undo :func:`instrument` for the named libraries, or for all."""
    for name in [n for n in _waiting if not libraries or n in libraries]:
        _waiting.discard(name)
    for name, instrumentor in _instrumentors.items():
        if not libraries or name in libraries:
            try:
                instrumentor.uninstrument()
            except Exception as exc:
                report(f"uninstrumenting {name}", exc)
