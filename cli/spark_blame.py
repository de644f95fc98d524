"""``blame --engine spark``: the Spark engine behind the CLI, with its failures as plain messages.

PySpark is an optional extra and needs Java, so it is imported only here, when
asked for; a missing package, a missing Java or an unreadable path each become
one sentence that says what to do.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.whatif import Scenario
from agentscope.store.paths import holds_parquet


class SparkProblem(Exception):
    """The Spark path cannot run: the message says why and what to do."""


def _engine() -> Any:
    try:
        from agentscope.engines import spark
    except ImportError as exc:
        raise SparkProblem(
            f"--engine spark needs PySpark ({exc.name} is missing): pip install 'agentscope[spark]'"
        ) from None
    return spark


@contextlib.contextmanager
def _jvm_output_to(log: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``log`` while the JVM starts: it inherits that, and its log4j chatter
    stays out of the terminal; Python's own stderr is restored right after."""
    saved = os.dup(2)
    with log.open("ab") as handle:
        os.dup2(handle.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _session(engine: Any, master: str | None) -> Any:
    remote = os.environ.get("SPARK_REMOTE")
    if not remote and not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise SparkProblem("--engine spark needs Java 17 or newer on PATH (or JAVA_HOME); none was found")
    log = Path(tempfile.gettempdir()) / "agentscope-spark.log"
    try:
        with _jvm_output_to(log):
            spark = engine.session(master)
    except Exception as exc:
        where = f"SPARK_REMOTE={remote}" if remote else (master or "local[*]")
        raise SparkProblem(f"could not start Spark ({where}): {_first_line(exc)}; its log: {log}") from None
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


_JAVA_PREFIX = re.compile(r"^:?\s*(?:[\w.$]+(?:Exception|Error):\s*)?")
_TRACEBACK = "Traceback (most recent call last):"
_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'")


def _first_line(exc: Exception) -> str:
    """The sentence of a (possibly Java) error that says what went wrong, without its class or stack.

    An error from a Python worker says only "An exception was thrown from the
    Python worker:" first; its cause is the last line of the traceback after it.
    """
    text = str(exc).strip()
    if _TRACEBACK in text:
        raised = [line for line in text.split(_TRACEBACK, 1)[1].splitlines() if line[:1].isalpha()]
        if raised:
            return f"a Spark Python worker failed: {raised[-1].split(' SQLSTATE:', 1)[0].strip()}"
    for line in text.splitlines():
        if line.strip() and not line.startswith("An error occurred while calling"):
            return _JAVA_PREFIX.sub("", line.strip())
    return type(exc).__name__


def _worker_advice(exc: Exception, spark: Any) -> str:
    """What to install where, when a Python worker could not import a module."""
    match = _MISSING_MODULE.search(_first_line(exc).removeprefix("a Spark Python worker failed: "))
    if match is None:
        return ""
    python = getattr(getattr(spark, "sparkContext", None), "pythonExec", None) if not _remote() else None
    where = (
        f"the workers run {python}" if python else "the Spark Connect server's workers run their own Python"
    )
    package = (
        "agentscope[spark]" if match.group(1).split(".")[0] in ("agentscope", "pandas", "pyarrow") else ""
    )
    install = f"pip install '{package}' into it" if package else f"install {match.group(1)} into it"
    return (
        f" ({where}: {install}, or set PYSPARK_PYTHON to a Python that has agentscope, "
        f"such as {sys.executable})"
    )


def _remote() -> bool:
    return bool(os.environ.get("SPARK_REMOTE"))


def blame_parquet(
    paths: Sequence[Path],
    scenarios: Sequence[Scenario],
    percentile: float,
    task_name: str | None,
    headline: Scenario | None,
    repair: bool,
    targets: Sequence[CandidateProfile],
    master: str | None,
    tasks_out: str | None = None,
) -> dict[str, Any] | None:
    """The blame report of the Parquet spans at ``paths`` (folders or files, local or object storage);
    the per-task table saved to ``tasks_out`` first, if given."""
    engine = _engine()
    local = [path for path in paths if "://" not in str(path)]
    missing = [str(path) for path in local if not path.exists()]
    if missing:
        raise SparkProblem(f"no such file or folder: {', '.join(missing)}")
    empty = [str(path) for path in local if path.is_dir() and not holds_parquet(path)]
    if empty:
        raise SparkProblem(f"no Parquet files in {', '.join(empty)} (agentscope export writes them)")
    spark = _session(engine, master)
    try:
        frame = spark.read.parquet(*(str(path) for path in paths))
        return engine.blame(
            frame,
            scenarios,
            percentile,
            task_name=task_name,
            headline=headline,
            repair=repair,
            targets=targets,
            tasks_out=tasks_out,
        )
    except Exception as exc:
        raise SparkProblem(
            f"Spark could not analyse {', '.join(map(str, paths))}: {_first_line(exc)}"
            f"{_worker_advice(exc, spark)}"
        ) from None
