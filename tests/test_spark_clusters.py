"""``blame --engine spark`` as users run it: the console script from a virtualenv that is not active,
a standalone cluster whose executors are processes of their own, and a Spark Connect server.

The master, the worker and the Connect server are the ones the PySpark package ships, started on
loopback by these tests and stopped by them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import cli
from test_spark import _require_spark
from tracebuild import varied_store

from agentscope.sim.server import free_port
from agentscope.store import Store
from agentscope.store.export import export_parquet

START_S = 120  # a JVM daemon on a loaded 2-core machine


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, dict]:
    """A store of 200 varied tasks exported to 4 buckets, and the DuckDB path's report of it."""
    _require_spark()
    folder = tmp_path_factory.mktemp("clusters")
    store = varied_store(folder / "varied.duckdb", 200)
    with Store(store, read_only=True) as opened:
        export_parquet(opened, folder / "spans", buckets=4)
    on_duckdb = cli("blame", "--store", str(store), "--format", "json")
    assert on_duckdb.returncode == 0, on_duckdb.stderr
    return folder / "spans", json.loads(on_duckdb.stdout)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _bare_env(**extra: str) -> dict[str, str]:
    """The environment of a shell where the virtualenv is not activated: no venv on PATH, no PySpark
    settings of ours."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    env["PATH"] = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir())
    return {**env, **extra}


def _console_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The installed ``agentscope`` script, called by its absolute path as pipx or a cron job would."""
    script = Path(sys.executable).parent / "agentscope"
    assert script.exists(), script
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=600, env={**env, "COLUMNS": "200"}
    )


def _daemon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=log.parent
        )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _wait_for(condition, what: str, log: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{what} did not start; its log ends: {log.read_text()[-2000:]}")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_console_script_outside_its_virtualenv_runs_workers_on_its_own_python(exported):
    spans, on_duckdb = exported
    result = _console_script(
        "blame",
        "--engine",
        "spark",
        str(spans),
        "--spark-master",
        "local[2]",
        "--format",
        "json",
        env=_bare_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == on_duckdb


def test_a_worker_python_without_agentscope_is_named_with_what_to_install(exported, tmp_path):
    spans, _ = exported
    bare = Path(sys.base_prefix) / "bin" / "python3"
    probe = subprocess.run([str(bare), "-c", "import agentscope"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{bare} has agentscope installed")
    result = _console_script(
        "blame",
        "--engine",
        "spark",
        str(spans),
        "--spark-master",
        "local[1]",
        env=_bare_env(PYSPARK_PYTHON=str(bare)),
    )
    flat = " ".join(result.stderr.split())
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "a Spark Python worker failed: ModuleNotFoundError: No module named" in flat
    assert f"the workers run {bare}" in flat and "pip install 'agentscope[spark]' into it" in flat
    assert f"set PYSPARK_PYTHON to a Python that has agentscope, such as {sys.executable}" in flat


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Iterator[str]:
    """A standalone master and one worker on loopback, each a JVM of its own; yields the master URL."""
    _require_spark()
    folder = tmp_path_factory.mktemp("standalone")
    home = _spark_home()
    env = {**_bare_env(), "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env["SPARK_WORKER_DIR"] = str(folder / "work")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(home / "bin" / "spark-class")
    master_log, worker_log = folder / "master.log", folder / "worker.log"
    master = _daemon(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        master_log, env,
    )  # fmt: skip
    worker = None
    try:
        _wait_for(lambda: _listening(port), "the standalone master", master_log, master)
        url = f"spark://127.0.0.1:{port}"
        worker = _daemon(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--webui-port", str(worker_ui), "--cores", "2", "--memory", "2g"],
            worker_log, env,
        )  # fmt: skip
        _wait_for(
            lambda: "Successfully registered with master" in worker_log.read_text(),
            "the standalone worker",
            worker_log,
            worker,
        )
        yield url
    finally:
        for process in (worker, master):
            if process is not None:
                _stop(process)


def test_a_standalone_cluster_on_loopback_gives_the_duckdb_report(exported, standalone_cluster):
    spans, on_duckdb = exported
    result = _console_script(
        "blame",
        "--engine",
        "spark",
        str(spans),
        "--spark-master",
        standalone_cluster,
        "--format",
        "json",
        env=_bare_env(SPARK_LOCAL_IP="127.0.0.1"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == on_duckdb


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory) -> Iterator[str]:
    """The Spark Connect server PySpark ships, on loopback, its workers on this virtualenv's Python."""
    _require_spark()
    folder = tmp_path_factory.mktemp("connect")
    home = _spark_home()
    port = free_port()
    env = {
        **_bare_env(),
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(folder),
        "SPARK_PID_DIR": str(folder),
        "PYSPARK_PYTHON": sys.executable,  # the server's executors must import agentscope
    }
    log = folder / "connect.log"
    server = _daemon(
        [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master", "local[2]",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1"],
        log, env,
    )  # fmt: skip
    try:
        _wait_for(lambda: _listening(port), "the Spark Connect server", log, server)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(server)


def test_a_spark_connect_server_gives_the_duckdb_report(exported, connect_server):
    spans, on_duckdb = exported
    result = _console_script(
        "blame", "--engine", "spark", str(spans), "--format", "json",
        env=_bare_env(SPARK_REMOTE=connect_server),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == on_duckdb


@pytest.mark.parametrize(
    ("master", "env", "ours"),
    [
        (None, {}, True),
        ("local[2]", {}, True),
        ("spark://127.0.0.1:7077", {}, True),
        ("spark://localhost:7077", {}, True),
        ("spark://spark-master.internal:7077", {}, False),
        ("yarn", {}, False),
        ("local[2]", {"PYSPARK_PYTHON": "/opt/py/bin/python"}, False),
        ("local[2]", {"PYSPARK_GATEWAY_PORT": "40000"}, False),  # under spark-submit
    ],
)
def test_the_workers_run_our_python_only_where_they_run_here_and_nobody_chose(
    master, env, ours, monkeypatch, tmp_path
):
    _require_spark()
    from agentscope.engines.spark import own_worker_python

    for key in ("PYSPARK_PYTHON", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert own_worker_python(master) == (sys.executable if ours else None)
    (tmp_path / "spark-defaults.conf").write_text("spark.pyspark.python   /opt/py/bin/python\n")
    assert own_worker_python(master) is None  # spark-defaults.conf names one
