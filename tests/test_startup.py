"""What starting the CLI, or a blame worker, loads: only what the command needs, so start-up stays short."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentscope.ingest import FORMATS, IngestSummary, Problem, detect, ingest


def _loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        # The CLI: the trace readers, the OTLP receiver's web stack and the SDK load with their commands.
        (
            "import agentscope.cli.app",
            {
                "agentscope.ingest.loader",
                "agentscope.ingest.receiver",
                "starlette",
                "opentelemetry.sdk.trace",
            },
        ),
        # A blame worker process imports the analysis (where its function lives), and nothing of the
        # store, the SDK or the readers.
        (
            "from agentscope.analysis.tasks import analyze_by_field",
            {"agentscope.sdk", "opentelemetry.sdk.trace", "agentscope.ingest.loader", "typer", "duckdb"},
        ),
        (
            "from agentscope.analysis.rows import analyze_rows",
            {"agentscope.sdk", "opentelemetry.sdk.trace", "agentscope.ingest.loader", "typer", "duckdb"},
        ),
        # Started from the console script, a worker imports the script, which imports the package for
        # ``main``: the app loads only when ``main`` runs.
        ("from agentscope.cli import main", {"agentscope.cli.app", "typer", "rich", "duckdb"}),
    ],
)
def test_start_up_loads_only_what_is_used(statement, absent):
    loaded = _loaded_after(statement)
    module = statement.split()[1]
    assert module in loaded
    assert not absent & loaded


def test_the_packages_names_load_on_first_use():
    import agentscope

    assert callable(ingest) and callable(detect) and "otlp-json-lines" in FORMATS
    assert IngestSummary.__name__ == "IngestSummary" and Problem.__name__ == "Problem"
    assert callable(agentscope.task) and agentscope.Instrumentor.__name__ == "Instrumentor"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        agentscope.ingest.nothing  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        agentscope.nothing  # noqa: B018


def test_every_module_imports_first():
    """Each module imported on its own into a fresh package: no import cycle depends on which comes first."""
    code = """
import importlib, pkgutil, sys
import agentscope
walked = pkgutil.walk_packages(agentscope.__path__, "agentscope.")
names = [m.name for m in walked if not m.name.endswith(".__main__")]  # those run a program
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "agentscope" or m.startswith("agentscope.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print(len(names))
print("\\n".join(failed))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, *failed = done.stdout.splitlines()
    assert int(count) > 40
    assert not [line for line in failed if line], failed


def test_a_worker_analyses_an_arrow_batch_without_loading_pandas(tmp_path):
    """Reading an Arrow batch, as a worker unpickles it, must not reach for pandas (pyarrow imports it
    for some conversions: 0.2 s in each worker process)."""
    import pyarrow as pa
    import pyarrow.ipc

    columns = {
        "trace_id": ["t", "t", "t", None],
        "span_id": ["a", "b", "c", "d"],
        "parent_id": [None, "a", "a", None],
        "kind": ["task", "llm", "llm", None],
        "start_ns": [0, 1, 5, 0],
        "end_ns": [9, 5, 8, 1],
    }
    path = tmp_path / "batch.arrow"
    with pa.ipc.new_file(path, pa.table(columns).schema) as writer:
        writer.write_table(pa.table(columns))
    code = f"""
import json, sys
import pyarrow.ipc
from agentscope.analysis.tasks import analyze_by_field
table = pyarrow.ipc.open_file({str(path)!r}).read_all()
assert "pandas" not in sys.modules
fields = analyze_by_field(table)
print(json.dumps({{"pandas": "pandas" in sys.modules, "tasks": len(fields[0])}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"pandas": False, "tasks": 1}


def test_an_ingest_of_json_lines_loads_no_pandas(tmp_path):
    """The DuckDB reader cuts its result at block ends by line number; pyarrow's ``to_numpy``, or a
    comparison with an Arrow scalar, would import pandas for it (0.4 s of an ingest)."""
    from traces_fixtures import dumps, otlp_request, otlp_span, s

    def line(n: int) -> str:
        spans = [
            otlp_span(f"{n:032x}", f"{n:08x}{k:08x}", None, "chat", k, k + 5, [s("gen_ai.system", "x")])
            for k in range(1, 4)
        ]
        return dumps(otlp_request(spans)) + "\n"

    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(line(n) for n in range(1, 4)))
    loaded = _loaded_after(
        "from agentscope.ingest import ingest\n"
        "from agentscope.store import Store\n"
        f"with Store({str(tmp_path / 'store.duckdb')!r}) as store:\n"
        f"    assert ingest(store, [{str(traces)!r}]).stored == 9"
    )
    assert "agentscope.ingest.otlp_duckdb" in loaded and "pandas" not in loaded


def test_a_first_read_of_a_store_loads_no_pandas(tmp_path):
    """A store's first read finds its task table empty: a query of no rows is a column of no chunks,
    which pyarrow's ``combine_chunks`` builds from an empty Python list, importing pandas (0.15 s of
    the read).  The later reads, from kept rows, must not either."""
    from traces_fixtures import dumps, otlp_request, otlp_span, s

    from agentscope.store import Store

    spans = [otlp_span(f"{n:032x}", f"{n:016x}", None, "handle", 0, 9) for n in range(1, 4)]
    spans += [
        otlp_span(f"{n:032x}", f"{n:08x}{k:08x}", f"{n:016x}", "chat", k, k + 2, [s("gen_ai.system", "x")])
        for n in range(1, 4)
        for k in range(1, 4)
    ]
    traces = tmp_path / "traces.jsonl"
    traces.write_text(dumps(otlp_request(spans)) + "\n")
    store = tmp_path / "store.duckdb"
    with Store(store) as kept:
        assert ingest(kept, [traces]).stored == 12
    read = (
        "from agentscope.analysis.pipeline import blame_store\n"
        "from agentscope.store.shared import SharedStore\n"
        f"assert blame_store(SharedStore({str(store)!r}), workers=1)['tasks']['count'] == 3"
    )
    for _ in ("the first read, every trace analysed", "a read from kept rows"):
        assert "pandas" not in _loaded_after(read)


def test_init_imports_no_library_the_app_has_not_and_instruments_one_when_it_does(tmp_path):
    """``ags.init()`` switches every integration on without importing a library (post-import hooks) and
    leaves the store's modules to the first flush on the writer thread; an openai call made after the
    app imports openai is recorded.  Storing it imports no pandas (which ``pa.array`` of Python values
    would): an app that records spans does not carry it."""
    from agentscope.sim.server import serve
    from agentscope.store import Store

    store = tmp_path / "startup.duckdb"
    heavy = ["openai", "anthropic", "duckdb", "pyarrow", "numpy", "pandas", "wrapt"]  # wrapt: 30 ms to import
    with serve() as base_url:
        code = f"""
import json, sys
import agentscope as ags
ags.init(service_name="startup", store={str(store)!r})
before = [m for m in {heavy!r} if m in sys.modules]
import openai
client = openai.OpenAI(base_url={base_url!r}, api_key="sim")
client.chat.completions.create(model="m", messages=[{{"role": "user", "content": "hi"}}])
ags.shutdown()
print(json.dumps([before, "pandas" in sys.modules]))
"""
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], False]
    with Store(store, read_only=True) as opened:
        (calls,) = opened.con.execute("SELECT count(*) FROM spans WHERE kind = 'llm'").fetchone()
    assert calls == 1


def test_spans_are_recorded_without_numpy(tmp_path):
    """The recording install (``pip install .``) has no NumPy, and pyarrow runs without it: the SDK's
    writer thread builds its batches from buffers (``store.columns``).  Here NumPy is made unimportable
    in the app's process, as it is in that install."""
    store = tmp_path / "no-numpy.duckdb"
    code = f"""
import sys
sys.modules["numpy"] = None
import agentscope as ags
ags.init(service_name="no-numpy", store={str(store)!r})
@ags.task
def work():
    with ags.span("plan", kind="tool"):
        return 1
work()
ags.shutdown()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr
    from agentscope.store import Store

    with Store(store, read_only=True) as opened:
        names = sorted(name for (name,) in opened.con.execute("SELECT name FROM spans").fetchall())
    assert names == ["plan", "work"]


def test_the_console_script_keeps_what_its_imports_made_from_the_collector():
    """The app's imports run with the collector paused and what they made is frozen, so the command's
    collections and the one at exit skip it; the collector is on again for the command."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.get_freeze_count(), gc.isenabled()))\n"
        "sys.argv = ['agentscope', '--help']\n"
        "from agentscope.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    frozen, enabled = done.stdout.split()[-2:]
    assert int(frozen) > 50_000 and enabled == "True"
