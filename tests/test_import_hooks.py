"""Post-import hooks: integrations are switched on when the application imports their library."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agentscope.sdk import instrumentation
from agentscope.sdk.import_hooks import when_imported


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path


def _write(folder, name: str, body: str = "VALUE = 1\n") -> None:
    (folder / f"{name}.py").write_text(body)


def test_a_hook_runs_once_after_the_module_body_with_the_module_keeping_its_loader(module_dir):
    _write(module_dir, "hooked_lib_a", "VALUE = 41\n")
    calls = []
    when_imported("hooked_lib_a", lambda module: calls.append(module.VALUE))
    assert "hooked_lib_a" not in sys.modules and calls == []
    import hooked_lib_a

    assert calls == [41]
    assert type(hooked_lib_a.__loader__).__name__ == "SourceFileLoader"
    assert hooked_lib_a.__spec__.loader is hooked_lib_a.__loader__
    del sys.modules["hooked_lib_a"]
    import hooked_lib_a

    assert calls == [41]


def test_a_hook_on_an_imported_module_runs_now(module_dir):
    _write(module_dir, "hooked_lib_b")
    import hooked_lib_b

    seen = []
    when_imported("hooked_lib_b", seen.append)
    assert seen == [hooked_lib_b]


def test_a_failing_hook_is_reported_and_the_import_still_succeeds(module_dir, caplog):
    _write(module_dir, "hooked_lib_c", "VALUE = 3\n")
    later = []

    def broken(module):
        raise RuntimeError("hook broke")

    when_imported("hooked_lib_c", broken)
    when_imported("hooked_lib_c", lambda module: later.append(module.VALUE))
    with caplog.at_level("WARNING", logger="agentscope"):
        import hooked_lib_c

    assert hooked_lib_c.VALUE == 3 and later == [3]
    assert "hook broke" in caplog.text


def test_a_module_whose_import_fails_keeps_its_hook_for_the_next_import(module_dir):
    _write(module_dir, "hooked_lib_d", "raise ImportError('not yet')\n")
    calls = []
    when_imported("hooked_lib_d", lambda module: calls.append(module.VALUE))
    with pytest.raises(ImportError, match="not yet"):
        import hooked_lib_d
    assert calls == []
    _write(module_dir, "hooked_lib_d", "VALUE = 4\n")
    sys.modules.pop("hooked_lib_d", None)
    import importlib

    importlib.invalidate_caches()
    import hooked_lib_d  # noqa: F401

    assert calls == [4]


def test_every_builtin_integration_patches_the_library_it_is_named_after():
    for name, target in instrumentation.BUILTIN.items():
        module, _, attribute = target.partition(":")
        cls = getattr(__import__(module, fromlist=[attribute]), attribute)
        assert cls.library == name, target


def test_a_third_party_integration_from_an_entry_point_is_switched_on_by_name(tmp_path):
    """A package installed with an ``agentscope.instrumentors`` entry point (a real dist-info, read by
    importlib.metadata); naming it instruments it, and ``instrument()`` alone does not read entry points."""
    dist = tmp_path / "agentscope_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentscope-plugin-demo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[agentscope.instrumentors]\nplugged = plugin_demo_inst:PluggedInstrumentor\n"
    )
    _write(tmp_path, "plugged", "def work():\n    return 'worked'\n")
    _write(
        tmp_path,
        "plugin_demo_inst",
        textwrap.dedent(
            """
            from agentscope.sdk.instrumentation import Instrumentor

            def wrapper(wrapped, instance, args, kwargs):
                return "instrumented " + wrapped(*args, **kwargs)

            class PluggedInstrumentor(Instrumentor):
                library = "plugged"

                def _instrument(self):
                    self.wrap("plugged", "work", wrapper)
            """
        ),
    )
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import agentscope as ags
        everything = ags.instrument()
        metadata_read = "importlib.metadata" in sys.modules
        named = ags.instrument("plugged")
        import plugged
        print(json.dumps([metadata_read, "plugged" in everything, named, plugged.work()]))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, False, ["plugged"], "instrumented worked"]


def test_uninstrumenting_a_library_before_it_is_imported_leaves_it_unpatched(tmp_path):
    code = textwrap.dedent(
        """
        import json, sys
        import agentscope as ags
        ags.instrument("sqlite3") if "sqlite3" not in sys.modules else None
        ags.uninstrument("sqlite3")
        import sqlite3
        patched = "agentscope" in type(sqlite3.connect).__module__ or hasattr(sqlite3.connect, "__wrapped__")
        print(json.dumps(patched))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is False
