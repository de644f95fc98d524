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
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.whatif import Scenario


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


def _first_line(exc: Exception) -> str:
    """The sentence of a (possibly Java) error that says what went wrong, without its class or stack."""
    for line in str(exc).strip().splitlines():
        if line.strip() and not line.startswith("An error occurred while calling"):
            return _JAVA_PREFIX.sub("", line.strip())
    return type(exc).__name__


def blame_parquet(
    paths: Sequence[Path],
    scenarios: Sequence[Scenario],
    percentile: float,
    task_name: str | None,
    headline: Scenario | None,
    repair: bool,
    targets: Sequence[CandidateProfile],
    master: str | None,
) -> dict[str, Any] | None:
    """The blame report of the Parquet spans at ``paths`` (folders or files, local or object storage)."""
    engine = _engine()
    local = [path for path in paths if "://" not in str(path)]
    missing = [str(path) for path in local if not path.exists()]
    if missing:
        raise SparkProblem(f"no such file or folder: {', '.join(missing)}")
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
        )
    except Exception as exc:
        raise SparkProblem(
            f"Spark could not analyse {', '.join(map(str, paths))}: {_first_line(exc)}"
        ) from None
