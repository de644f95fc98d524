"""Run a callback when the application first imports a module (a post-import hook).

``ags.init()`` must not import the libraries it instruments: an app that never
uses anthropic should not pay for importing it.  So an integration whose library
is not imported yet asks to be called when it is.  A finder at the front of
``sys.meta_path`` lets the real finders locate the module, then wraps the
loader so the callbacks run right after the module body has executed, before
the ``import`` statement returns to the application.

The same technique as wrapt's ``register_post_import_hook`` and OpenTelemetry's
auto-instrumentation, kept here because importing wrapt costs ~50 ms of start-up
(it imports asyncio and importlib.metadata), most of what the SDK may spend.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agentscope.sdk._safety import report

Hook = Callable[[ModuleType], None]

_hooks: dict[str, list[Hook]] = {}
_lock = threading.Lock()


def when_imported(name: str, hook: Hook) -> None:
    """Call ``hook(module)`` once the module ``name`` is imported: now, if it already is."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append(hook)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
    if module is not None:
        _call(name, hook, module)


def _call(name: str, hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception as exc:  # the hook's own failure: the application's import goes on
        report(f"the import hook of {name}", exc, internal=False)


def _imported(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
        if not _hooks and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
    for hook in hooks:
        _call(name, hook, module)


class _Finder:
    """Finds nothing itself: hands a hooked module's spec back with its loader wrapped."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _hooks:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


class _Loader:
    """The module's own loader, then the hooks; the module keeps its real loader."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _imported(self._name, sys.modules.get(self._name, module))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


_FINDER = _Finder()
