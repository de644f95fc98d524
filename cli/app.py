"""The Typer application behind the ``agentscope`` console script.

Commands parse their options, call the core and render; errors become a plain
message on stderr and an exit code (0 ok, 1 nothing to analyse, 2 bad input or
usage), never a traceback.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import socket
import sys
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from agentscope.cli.budget_markdown import budget_markdown
from agentscope.cli.compare_render import compare_markdown, print_compare
from agentscope.cli.extras import missing_extra
from agentscope.cli.render import blame_markdown, print_blame, probe_table
from agentscope.cli.spark_blame import SparkProblem, blame_parquet
from agentscope.cli.waterfall import waterfall
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentscope import __version__
from agentscope.analysis import categories
from agentscope.analysis.chips import load_presets
from agentscope.analysis.compare import compare as compare_reports
from agentscope.analysis.pipeline import (
    TaskTableError,
    blame_saved,
    blame_store,
    explain_stored_trace,
    kept_results,
)
from agentscope.analysis.probing import calls_in_flight, choose_sizes, fit_profile, load_plan
from agentscope.analysis.profiles import CandidateProfile, ProfileError
from agentscope.analysis.profiles import load_presets as load_profiles
from agentscope.analysis.profiles import resolve as resolve_profile
from agentscope.analysis.report import DEFAULT_SCENARIOS, trace_report
from agentscope.analysis.whatif import Scenario
from agentscope.budget.catalog import CatalogError
from agentscope.budget.catalog import load as load_catalog
from agentscope.budget.pipeline import budget_store
from agentscope.ingest.limits import DEFAULT_MAX_BODY
from agentscope.ingest.runs import stored_trace_ids
from agentscope.store import Store, StoreError, default_store_path
from agentscope.store.query import PROBE_SERVICE, llm_call_intervals, llm_token_counts
from agentscope.store.selection import Selection, SelectionError, format_time, parse_duration, parse_time
from agentscope.store.shared import SharedStore
from agentscope.store.store import is_interrupt

if TYPE_CHECKING:
    from agentscope.ingest import IngestSummary

app = typer.Typer(
    name="agentscope",
    help="Where does your agents' p95 go, and would a faster inference chip help?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_NOTHING = 1
EXIT_BAD_INPUT = 2


class UsageProblem(Exception):
    """Bad input or usage: printed as a message, exit code 2."""


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


def require(extra: str, what: str) -> None:
    """Stop with a one-line message when ``what`` needs an extra that is not installed."""
    message = missing_extra(extra, what)
    if message is not None:
        raise fail(message)


def finite(value: float) -> float:
    """A float option's value, refused when NaN or infinite: click's ranges let NaN through (every
    comparison with it is false), and a projection to ``inf`` tasks prints nonsense or invalid JSON."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def _version(value: bool) -> None:
    if value:
        typer.echo(f"agentscope {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Instrument agents, store their traces, blame the tail latency, budget the hardware."""


@contextmanager
def open_store(paths: list[Path] | None, store: Path | None, console: Console) -> Iterator[Store]:
    """The store to read (DESIGN §8), as a snapshot other processes can keep writing beside (§11).

    No PATH: ``--store`` or the default store.  PATHs and no ``--store``: exactly
    those files, loaded into an in-memory store (a single store file is read in
    place).  Both: the PATHs are ingested into ``--store`` first.  Bad input in
    the PATHs is reported, the rest analysed, and the exit code is then 2.
    """
    with _opened(paths, store, console, snapshot=True) as opened:
        assert isinstance(opened, Store)  # a snapshot, or the files in memory
        yield opened


@contextmanager
def open_analysis(
    paths: list[Path] | None, store: Path | None, console: Console
) -> Iterator[Store | SharedStore]:
    """The store to analyse, chosen as :func:`open_store` does: a store file is not copied but answered
    from its task table, with only what changed analysed (DESIGN §15)."""
    with _opened(paths, store, console, snapshot=False) as opened:
        yield opened


@contextmanager
def _opened(
    paths: list[Path] | None, store: Path | None, console: Console, snapshot: bool
) -> Iterator[Store | SharedStore]:
    summary = None
    if paths and not (store is None and len(paths) == 1 and _is_store_file(paths[0])):
        if store is None:
            with Store(None) as target:
                summary = _ingest(target, paths, console)
                yield target
            if not summary.ok:
                raise typer.Exit(EXIT_BAD_INPUT)
            return
        summary = _ingest(SharedStore(store), paths, console)
        paths = None
    target_path = paths[0] if paths else (store if store is not None else Path(default_store_path()))
    if not target_path.exists():
        raise UsageProblem(
            f"store {target_path} does not exist (run your instrumented agent first, or pass --store)"
        )
    try:
        if snapshot:
            with SharedStore(target_path).reading() as opened:
                yield opened
        else:
            yield SharedStore(target_path)
    except StoreError as exc:
        raise UsageProblem(str(exc)) from exc
    if summary is not None and not summary.ok:
        raise typer.Exit(EXIT_BAD_INPUT)


def _ingest(target: Store | SharedStore, paths: list[Path], console: Console) -> IngestSummary:
    from agentscope.cli.ingesting import ingest_with_progress, print_problems

    try:
        summary = ingest_with_progress(target, paths, console)
    except StoreError as exc:
        raise UsageProblem(str(exc)) from exc
    print_problems(summary, console)
    if summary.spans_read == 0 and not summary.ok:
        raise UsageProblem("no span could be read from the given paths")
    return summary


def _is_store_file(path: Path) -> bool:
    from agentscope.ingest.sniff import DUCKDB_MAGIC

    try:
        with path.open("rb") as handle:
            return handle.read(12)[8:12] == DUCKDB_MAGIC
    except OSError:
        return False


def parse_speedup(text: str) -> Scenario:
    """``inference=3.6`` or ``inference.decode=6,tool=2`` → a scenario."""
    speedups: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not categories.valid_target(name):
            raise UsageProblem(
                f"--speedup {text!r}: expected CATEGORY=FACTOR with a category or component among "
                f"{', '.join(categories.KEYS)} (or {', '.join(categories.CATEGORIES)})"
            )
        try:
            factor = math.inf if value.strip().lower() in ("inf", "∞") else float(value)
        except ValueError:
            raise UsageProblem(f"--speedup {text!r}: {value!r} is not a number") from None
        if not factor > 0:
            raise UsageProblem(f"--speedup {text!r}: the factor must be positive")
        speedups[name] = factor
    words = ", ".join(f"{k} x{'∞' if math.isinf(v) else f'{v:g}'}" for k, v in speedups.items())
    return Scenario(words, speedups)


def scenarios_for(speedups: list[str], chip: str | None) -> tuple[list[Scenario], Scenario | None]:
    scenarios = list(DEFAULT_SCENARIOS)
    headline = None
    for text in speedups:
        headline = parse_speedup(text)
        scenarios.append(headline)
    if chip:
        presets = load_presets()
        if chip not in presets:
            raise UsageProblem(f"unknown --chip {chip!r}; known presets: {', '.join(sorted(presets))}")
        headline = presets[chip].scenario()
        scenarios.append(headline)
    return scenarios, headline


def targets_for(names: list[str]) -> list[CandidateProfile]:
    """``--target`` values: preset names or profile files."""
    try:
        return [resolve_profile(name) for name in names]
    except ProfileError as exc:
        raise UsageProblem(str(exc)) from None


@contextmanager
def output_file(output: Path) -> Iterator[TextIO]:
    """``output`` open for writing text; a path that cannot be written is the user's to fix (a missing
    folder, no permission, a full disk), said in one line rather than as an internal error."""
    try:
        with output.open("w", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise fail(f"cannot write {output}: {exc.strerror or exc}") from None


def emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        with output_file(output) as handle:
            handle.write(text)


def emit_report(
    document: Mapping[str, Any],
    fmt: str,
    output: Path | None,
    markdown: Callable[[Mapping[str, Any]], str],
    page: Callable[[Mapping[str, Any], Console], None],
) -> None:
    """A report as JSON, markdown or its terminal page (a file gets the page at 120 columns)."""
    if fmt == "json":
        emit(json.dumps(document, indent=2), output)
    elif fmt == "markdown":
        emit(markdown(document), output)
    elif output is not None:
        with output_file(output) as handle:
            page(document, Console(file=handle, width=120))
    else:
        page(document, Console())


NoRepairOption = Annotated[
    bool,
    typer.Option(
        "--no-repair", help="Walk foreign traces exactly as recorded (no enclosed-sibling repair, §5.1)."
    ),
]

TaskOption = Annotated[str | None, typer.Option("--task", help="Only tasks with this name.")]
ServiceOption = Annotated[
    str | None, typer.Option("--service", help="Only traces with a span of this service (service.name).")
]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="Only tasks starting at or after: ISO time, or 24h, 7d back.")
]
UntilOption = Annotated[
    str | None, typer.Option("--until", help="Only tasks starting before: ISO time, or 24h, 7d back.")
]


def selection_of(task: str | None, service: str | None, since: str | None, until: str | None) -> Selection:
    try:
        return Selection.parse(task, service, since, until)
    except SelectionError as exc:
        raise UsageProblem(str(exc)) from None


StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="Store to read (default ./agentscope.duckdb or $AGENTSCOPE_STORE)."),
]

KeepContentOption = Annotated[
    bool,
    typer.Option(
        "--keep-content",
        help="Keep prompts, completions and query text in the stored spans (dropped by default).",
    ),
]


@app.command("ingest")
def ingest_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Trace files or folders (OTLP JSON/protobuf, Jaeger, Zipkin).")
    ],
    store: StoreOption = None,
    keep_content: KeepContentOption = False,
) -> None:
    """Load trace files into the store; exit 2 if any input was bad (the good spans are kept)."""
    from agentscope.cli.ingesting import ingest_with_progress, print_problems, summary_table

    target = store if store is not None else Path(default_store_path())
    console = Console(stderr=True)
    try:
        summary = ingest_with_progress(SharedStore(target), paths, console, keep_content)
    except StoreError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        message = (
            f"interrupted; {target} keeps whole batches only, and loading the same files again completes it"
        )
        raise fail(message, 130) from None
    Console().print(summary_table(summary, str(target)))
    print_problems(summary, console)
    if not summary.ok:
        raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
def export(
    out: Annotated[Path, typer.Option("--out", help="Folder to write (replaced if it holds an export).")],
    store: StoreOption = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet (the only format).")] = "parquet",
    buckets: Annotated[
        int | None,
        typer.Option("--buckets", min=1, help="Hash buckets of trace ids (default: one per 250k spans)."),
    ] = None,
    tasks: Annotated[
        bool, typer.Option("--tasks", help="Write the task table (one row a task) instead of the spans.")
    ] = False,
) -> None:
    """Write the analyzer's columns as Parquet partitioned by bucket, for blame --engine spark."""
    from agentscope.cli.exporting import export_table, export_with_progress  # Arrow datasets: slow to import

    from agentscope.store.export import ExportError, export_tasks

    if fmt != "parquet":
        raise fail(f"--format {fmt!r}: only parquet is supported")
    console = Console(stderr=True)
    if tasks:
        target = store if store is not None else Path(default_store_path())
        if not target.exists():
            raise fail(f"store {target} does not exist")
        shared = SharedStore(target)
        try:
            kept_results(shared)  # every trace written since its analysis is analysed: the rows are current
            written = shared.read(lambda opened: export_tasks(opened, out))
        except (ExportError, StoreError) as exc:
            raise fail(str(exc)) from None
        Console().print(
            f"exported {written:,} tasks to {out / 'tasks.parquet'} (blame --tasks {out} reads them)"
        )
        return
    try:
        with open_store(None, store, console) as opened:
            manifest = export_with_progress(opened, out, buckets, console)
    except (UsageProblem, ExportError, StoreError) as exc:
        raise fail(str(exc)) from None
    Console().print(export_table(manifest, out))


@app.command()
def prune(
    before: Annotated[
        str,
        typer.Option("--before", help="Delete traces that ended before this: ISO time, or 30d, 12h back."),
    ],
    store: StoreOption = None,
    no_compact: Annotated[
        bool,
        typer.Option("--no-compact", help="Leave the freed space in the file for later writes to reuse."),
    ] = False,
) -> None:
    """Delete old traces and their task rows, and give the disk back."""
    try:
        cutoff = parse_time(before, option="--before")
    except SelectionError as exc:
        raise fail(str(exc)) from None
    target = store if store is not None else Path(default_store_path())
    if not target.exists():
        raise fail(f"store {target} does not exist")
    size = target.stat().st_size
    try:
        traces, spans = SharedStore(target).prune(cutoff, compact=not no_compact)
    except StoreError as exc:
        raise fail(str(exc)) from None
    Console().print(
        f"pruned {traces:,} traces ({spans:,} spans) that ended before {format_time(cutoff)} from {target}; "
        f"the file: {size / 1e6:,.1f} MB → {target.stat().st_size / 1e6:,.1f} MB",
        highlight=False,
    )


@app.command()
def demo(
    tasks: Annotated[int, typer.Option("--tasks", min=1, help="Tasks per example agent.")] = 20,
    store: StoreOption = None,
) -> None:
    """Run three example agents against simulated providers (no key, no network), then blame them."""
    require("demo", "agentscope demo")
    from agentscope.cli.demo import run_demo

    target = store if store is not None else Path(default_store_path())
    console = Console()
    try:
        run_demo(tasks, target, console)
    except KeyboardInterrupt:
        raise fail("interrupted; the simulated servers were stopped", 130) from None
    except StoreError as exc:
        raise fail(str(exc)) from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (loopback)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@contextmanager
def bound_socket(host: str, port: int) -> Iterator[socket.socket]:
    """A TCP socket listening on ``host:port`` for a server, closed after it: a port in use or an address
    this machine does not have is one line before any banner, where uvicorn would log it and exit 3."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    with sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            sock.bind(address)
            sock.listen()  # from here a client that read the banner queues, not refused, till the server runs
        except OSError as exc:
            raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        yield sock


def _url(host: str, sock: socket.socket) -> str:
    """The server's address as a browser or an exporter takes it, with the port the system gave
    (``--port 0``)."""
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def run_server(asgi: Any, sock: socket.socket) -> None:
    """Serve ``asgi`` on a listening socket until Ctrl-C, the way a server is stopped: uvicorn raises the
    signal again once it has shut down, which ends the server here, not the command."""
    import uvicorn

    with suppress(KeyboardInterrupt):
        uvicorn.Server(uvicorn.Config(asgi, log_level="warning")).run(sockets=[sock])


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (4318 is OTLP/HTTP's).")] = 4318,
    store: StoreOption = None,
    max_body: Annotated[
        int, typer.Option("--max-body", help="Largest accepted request body, bytes (after gzip).")
    ] = DEFAULT_MAX_BODY,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="AGENTSCOPE_TOKEN",
            help="Bearer token every request must carry (needed to listen beyond loopback).",
            show_envvar=True,
        ),
    ] = None,
    keep_content: KeepContentOption = False,
    retain: Annotated[
        str | None,
        typer.Option("--retain", help="Delete traces that ended longer ago than this (30d, 12h) as it runs."),
    ] = None,
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces, protobuf or JSON) into the store."""
    require("serve", "agentscope serve")
    from agentscope.ingest.receiver import Receiver

    if not is_loopback(host) and not token:
        raise fail(
            f"--host {host} is reachable from other machines: give a bearer token with --token or "
            "AGENTSCOPE_TOKEN (exporters send it: OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20TOKEN)"
        )
    target = store if store is not None else Path(default_store_path())
    try:
        retain_ns = parse_duration(retain, "--retain") if retain else None
    except SelectionError as exc:
        raise fail(str(exc)) from None
    with bound_socket(host, port) as sock:
        try:
            receiver = Receiver(
                target, max_body=max_body, token=token or None, keep_content=keep_content, retain_ns=retain_ns
            )
        except StoreError as exc:
            raise fail(str(exc)) from None
        console = Console(stderr=True)
        guarded = " (bearer token required)" if token else ""
        url = f"{_url(host, sock)}/v1/traces"
        console.print(f"receiving OTLP/HTTP traces on {url} into {target}{guarded} (Ctrl-C stops)")
        try:
            run_server(receiver.app, sock)
        finally:
            receiver.close()
    spilled = f"; {receiver.writer.spilled:,} spooled for the next writer" if receiver.writer.spilled else ""
    pruned = f"; {receiver.writer.pruned_traces:,} old traces pruned" if receiver.writer.pruned_traces else ""
    dropped = ", ".join(f"{n:,} {signal}" for signal, n in sorted(receiver.dropped.items()))
    dropped = f"; requests of other signals acknowledged and not kept: {dropped}" if dropped else ""
    console.print(f"stopped; {receiver.received:,} spans received{spilled}{pruned}{dropped}")


@app.command()
def blame(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Trace files or folders to analyse (with --store: ingest them first)."),
    ] = None,
    store: StoreOption = None,
    task: TaskOption = None,
    service: ServiceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    percentile: Annotated[
        float,
        typer.Option("--percentile", min=1, max=100, callback=finite, help="Budget at this percentile."),
    ] = 95,
    speedup: Annotated[
        list[str] | None,
        typer.Option("--speedup", help="A what-if scenario, CAT=F or CAT=F,CAT=F (repeatable)."),
    ] = None,
    chip: Annotated[str | None, typer.Option("--chip", help="A chip preset (see docs/cli.md).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or markdown.")] = "table",
    output: Annotated[Path | None, typer.Option("--output", help="Write the report to this file.")] = None,
    no_repair: NoRepairOption = False,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target", help="A candidate profile: preset name or TOML file (repeatable; see profiles)."
        ),
    ] = None,
    engine: Annotated[
        str, typer.Option("--engine", help="duckdb (the store) or spark (Parquet PATHs from export).")
    ] = "duckdb",
    spark_master: Annotated[
        str | None,
        typer.Option("--spark-master", help="Spark master URL (default local[*]; SPARK_REMOTE: Connect)."),
    ] = None,
    tasks: Annotated[
        list[Path] | None,
        typer.Option("--tasks", help="Saved per-task tables (Parquet: export --tasks, --tasks-out) to read."),
    ] = None,
    tasks_out: Annotated[
        str | None,
        typer.Option("--tasks-out", help="With --engine spark: save the per-task table to this folder."),
    ] = None,
) -> None:
    """Where the p95 goes, and what a faster chip (or anything else) would change."""
    try:
        if fmt not in ("table", "json", "markdown"):
            raise UsageProblem(f"--format {fmt!r}: choose table, json or markdown")
        if engine not in ("duckdb", "spark"):
            raise UsageProblem(f"--engine {engine!r}: choose duckdb or spark")
        scenarios, headline = scenarios_for(speedup or [], chip)
        targets = targets_for(target or [])
        selection = selection_of(task, service, since, until)
        if tasks_out is not None and engine != "spark":
            raise UsageProblem(
                "--tasks-out saves a Spark run's per-task table (agentscope export --tasks: a store's)"
            )
        if tasks:
            if paths or store is not None or engine == "spark" or no_repair or targets:
                raise UsageProblem(
                    "--tasks reads saved task tables alone: no PATH, --store, --engine spark, --no-repair or "
                    "--target (those analyse spans)"
                )
            missing = [str(path) for path in tasks if not path.exists()]
            if missing:
                raise UsageProblem(f"--tasks: no such file or folder: {', '.join(missing)}")
            where = ", ".join(map(str, tasks))
            report = blame_saved(tasks, scenarios, percentile, headline, selection)
        elif engine == "spark":
            if not paths or store is not None:
                raise UsageProblem("--engine spark reads Parquet PATHs (agentscope export), not --store")
            if service or since or until:
                raise UsageProblem(
                    "--service, --since and --until select in the store; with --engine spark, point PATH at "
                    "the partitions to analyse"
                )
            where = ", ".join(map(str, paths))
            report = blame_parquet(
                paths, scenarios, percentile, task, headline, not no_repair, targets, spark_master, tasks_out
            )
        else:
            with open_analysis(paths, store, Console(stderr=True)) as opened:
                report = blame_store(
                    opened,
                    scenarios,
                    percentile,
                    headline=headline,
                    repair=not no_repair,
                    targets=targets,
                    selection=selection,
                )
                where = opened.path
    except (UsageProblem, SparkProblem, TaskTableError) as exc:
        raise fail(str(exc)) from None
    if report is None:
        raise fail(
            f"no tasks{selection.describe()} in {where}: a task is a span of kind task, an agent invocation, "
            "or a trace root, with at least one llm or tool span under it",
            EXIT_NOTHING,
        )
    emit_report(report, fmt, output, blame_markdown, print_blame)


@app.command()
def budget(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Trace files or folders to budget (with --store: ingest them first)."),
    ] = None,
    store: StoreOption = None,
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Your pricing catalog (TOML).")] = None,
    tasks_per_month: Annotated[
        float,
        typer.Option("--tasks-per-month", min=0, callback=finite, help="Monthly task volume to project to."),
    ] = 10_000,
    model_map: Annotated[
        list[str] | None,
        typer.Option("--model-map", help="Price a traced model as a catalog model: TRACED=CANDIDATE."),
    ] = None,
    task: TaskOption = None,
    service: ServiceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    speedup: Annotated[list[str] | None, typer.Option("--speedup", help="Extra what-if scenario.")] = None,
    chip: Annotated[str | None, typer.Option("--chip", help="A chip preset for the what-if rows.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="markdown, json or html.")] = "markdown",
    output: Annotated[Path | None, typer.Option("--output", help="Write the document to this file.")] = None,
    no_repair: NoRepairOption = False,
    target: Annotated[
        list[str] | None,
        typer.Option("--target", help="A candidate profile for the decision table (repeatable)."),
    ] = None,
) -> None:
    """Latency and token cost as a document procurement can read."""
    try:
        if fmt not in ("markdown", "json", "html"):
            raise UsageProblem(f"--format {fmt!r}: choose markdown, json or html")
        if fmt == "html" and output is None:
            raise UsageProblem("--format html writes a file: give --output FILE")
        if fmt == "html" and (message := missing_extra("ui", "budget --format html")):
            raise UsageProblem(message)
        mapping = {}
        for text in model_map or []:
            traced, sep, candidate = text.partition("=")
            if not sep or not traced or not candidate:
                raise UsageProblem(f"--model-map {text!r}: expected TRACED=CANDIDATE")
            mapping[traced] = candidate
        try:
            catalog = load_catalog(pricing)
            catalog.check_model_map(mapping)
        except CatalogError as exc:
            raise UsageProblem(str(exc)) from None
        scenarios, headline = scenarios_for(speedup or [], chip)
        targets = targets_for(target or [])
        selection = selection_of(task, service, since, until)
        with open_analysis(paths, store, Console(stderr=True)) as opened:
            document = budget_store(
                opened,
                catalog,
                tasks_per_month,
                scenarios=scenarios,
                headline=headline,
                model_map=mapping,
                repair=not no_repair,
                targets=targets,
                selection=selection,
            )
            where = opened.path
    except UsageProblem as exc:
        raise fail(str(exc)) from None
    if document is None:
        raise fail(f"no tasks{selection.describe()} in {where or 'the given files'} to budget", EXIT_NOTHING)
    if fmt == "json":
        emit(json.dumps(document, indent=2), output)
    elif fmt == "markdown":
        emit(budget_markdown(document), output)
    else:
        from agentscope.cli.budget_html import budget_html  # plotly: slow to import, only for HTML

        with output_file(output) as handle:
            handle.write(budget_html(document))
        Console(stderr=True).print(f"wrote {output}")


@app.command()
def show(
    trace_id: Annotated[
        str,
        typer.Argument(
            help="The trace to draw: 32 hex digits, or the id LangSmith, Langfuse or Jaeger shows."
        ),
    ],
    store: StoreOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    no_repair: NoRepairOption = False,
    task: TaskOption = None,
    service: ServiceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
) -> None:
    """Draw one task's waterfall with its critical path marked (a trace without a task: its root)."""
    try:
        if fmt not in ("table", "json"):
            raise UsageProblem(f"--format {fmt!r}: choose table or json")
        selection = selection_of(task, service, since, until)
        with open_store(None, store, Console(stderr=True)) as opened:
            ids = stored_trace_ids(trace_id)
            if not ids:
                raise UsageProblem("TRACE_ID is empty: give the id of a trace in the store")
            for stored in ids:
                explanation = explain_stored_trace(opened, stored, repair=not no_repair, selection=selection)
                if explanation is not None:
                    break
            where = opened.path
    except UsageProblem as exc:
        raise fail(str(exc)) from None
    if explanation is None:
        matching = f" with a task{selection.describe()}" if selection else ""
        raise fail(f"no trace {trace_id}{matching} in {where}", EXIT_NOTHING)
    if not explanation.is_task:
        root = explanation.trace.value("name", explanation.task)
        Console(stderr=True).print(
            f"note: trace {stored} holds no task (a span of kind task, or an agent invocation or root "
            f"with an llm or tool span under it); explaining its root span {root!r} instead",
            highlight=False,
        )
    if fmt == "json":
        emit(json.dumps(trace_report(explanation), indent=2), None)
    else:
        console = Console()
        console.print(waterfall(explanation, console.width))


@app.command()
def compare(
    baseline: Annotated[
        str,
        typer.Argument(help="A store or trace file, or a window SINCE..UNTIL of --store (.. is all of it)."),
    ],
    candidate: Annotated[
        str, typer.Argument(help="The same, for the candidate (e.g. 7d.. for the last week).")
    ],
    store: StoreOption = None,
    task: TaskOption = None,
    service: ServiceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    percentile: Annotated[
        float,
        typer.Option(
            "--percentile", min=1, max=100, callback=finite, help="Compare budgets at this percentile."
        ),
    ] = 95,
    fmt: Annotated[str, typer.Option("--format", help="table, json or markdown.")] = "table",
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the comparison to this file.")
    ] = None,
    no_repair: NoRepairOption = False,
) -> None:
    """Two selections side by side: before and after a provider trial, say."""
    console = Console(stderr=True)
    try:
        if fmt not in ("table", "json", "markdown"):
            raise UsageProblem(f"--format {fmt!r}: choose table, json or markdown")
        named = (("baseline", baseline), ("candidate", candidate))
        sides = [_compare_side(role, text, task, service, since, until) for role, text in named]
        reports = []
        with ExitStack() as stack:
            opened: dict[Path | None, Store | SharedStore] = {}
            for (role, text), (source, selection) in zip(named, sides):
                if source not in opened:
                    paths = None if source is None else [source]
                    opened[source] = stack.enter_context(
                        open_analysis(paths, store if paths is None else None, console)
                    )
                report = blame_store(
                    opened[source], percentile=percentile, repair=not no_repair, selection=selection
                )
                if report is None:
                    raise fail(f"no tasks{selection.describe()} in the {role} {text}", EXIT_NOTHING)
                reports.append(report)
    except UsageProblem as exc:
        raise fail(str(exc)) from None
    document = compare_reports(*reports, baseline, candidate)
    emit_report(document, fmt, output, compare_markdown, print_compare)


def _compare_side(
    role: str, text: str, task: str | None, service: str | None, since: str | None, until: str | None
) -> tuple[Path | None, Selection]:
    """The file one side of ``compare`` reads (None: ``--store``) and its selection; ``..`` is the
    window of the whole store, not the parent folder."""
    path = Path(text)
    if text != ".." and path.exists():
        return path, selection_of(task, service, since, until)
    if ".." in text:
        start, _, end = text.partition("..")
        return None, selection_of(task, service, start or since, end or until)
    raise UsageProblem(
        f"{role} {text!r} is neither a file nor a window SINCE..UNTIL of the store (e.g. 14d..7d, 7d..)"
    )


@app.command()
def ui(
    store: StoreOption = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port.")] = 8765,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            help="A candidate profile the budget page predicts (repeatable; default: every preset).",
        ),
    ] = None,
) -> None:
    """A local web UI over the store: overview, tasks, waterfalls with the critical path, budget."""
    require("ui", "agentscope ui")
    from agentscope.cli.ui import create_app

    try:
        candidates = targets_for(target) if target else list(load_profiles().values())
    except UsageProblem as exc:
        raise fail(str(exc)) from None
    target_path = store if store is not None else Path(default_store_path())
    console = Console(stderr=True)
    with bound_socket(host, port) as sock:
        if not is_loopback(host):
            console.print(
                f"[yellow]warning:[/yellow] --host {host} is reachable from other machines and the UI has no "
                "login: anyone who reaches it can read these traces",
                highlight=False,
            )
        if not target_path.exists():
            console.print(
                f"[yellow]note:[/yellow] {target_path} does not exist yet; the pages fill in once it does"
            )
        url = f"{_url(host, sock)}/"
        console.print(f"agentscope UI on {url} over {target_path} (Ctrl-C stops)", highlight=False)
        run_server(create_app(target_path, candidates), sock)


@app.command()
def probe(
    base_url: Annotated[str, typer.Option("--base-url", help="The candidate's OpenAI-compatible base URL.")],
    model: Annotated[str, typer.Option("--model", help="The model to ask for.")],
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env", help="Environment variable holding the API key (never stored or printed)."
        ),
    ] = None,
    store: StoreOption = None,
    calls: Annotated[int, typer.Option("--calls", min=2, max=1000, help="Calls to send.")] = 30,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            max=64,
            help="Calls at once (default: the app's own, the median number of its LLM calls in flight).",
        ),
    ] = None,
    max_seconds: Annotated[
        float, typer.Option("--max-seconds", min=1, help="No call is started after this long.")
    ] = 600,
    output: Annotated[
        Path | None, typer.Option("--output", help="Where to write the fitted profile.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The profile's name.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Send without asking.")] = False,
) -> None:
    """Measure a candidate endpoint on calls the size of your recorded ones, and fit its profile."""
    require("probe", "agentscope probe")
    import openai
    from agentscope.integrations.openai import OpenAIInstrumentor
    from agentscope.integrations.openai_probe import Endpoint
    from agentscope.integrations.openai_probe import probe as run_probe

    import agentscope as ags

    console = Console(stderr=True)
    target = store if store is not None else Path(default_store_path())
    try:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageProblem(
                f"--base-url {base_url!r}: give an http(s) URL, e.g. https://api.groq.com/openai/v1"
            )
        api_key = "not-needed"
        if api_key_env is not None:
            if not os.environ.get(api_key_env):
                raise UsageProblem(f"--api-key-env {api_key_env}: that environment variable is not set")
            api_key = os.environ[api_key_env]
        if not target.exists():
            raise UsageProblem(
                f"store {target} does not exist: the probe sends calls the size of its LLM calls"
            )
        with open_store(None, target, console) as opened:
            recorded = llm_token_counts(opened)
            if concurrency is None:
                concurrency = calls_in_flight(llm_call_intervals(opened))
        sizes = choose_sizes(recorded, calls)
        if not sizes:
            raise UsageProblem(f"no LLM call with input and output token counts in {target}")
    except UsageProblem as exc:
        raise fail(str(exc)) from None
    measured_sizes, background = load_plan(sizes, recorded, concurrency)
    sent = [*measured_sizes, *background]
    tokens_in, tokens_out = sum(i for i, _ in sent), sum(o for _, o in sent)
    price = ""
    options = load_catalog(None).for_model(model)
    if options:
        price = f", about ${options[0].cost(tokens_in, tokens_out):.4f} at {options[0].name}'s list price"
    load = (
        f"one at a time while {concurrency - 1} more at a time, like your app's, make its load of "
        f"{concurrency} at a time (up to {len(background)}, not measured)"
        if background
        else "1 at a time"
    )
    console.print(
        f"The probe sends {'up to ' if background else ''}{len(sent) + 2} calls to {base_url} ({model}): "
        f"{len(sizes)} of your recorded sizes plus 2 to calibrate, {load}, "
        f"{'at most ' if background else ''}{tokens_in:,} input and {tokens_out:,} output tokens in all"
        f"{price}; the prompts are filler text, never your recorded content.",
        highlight=False,
    )
    if not yes:
        if not sys.stdin.isatty():
            raise fail("pass --yes to send without asking (standard input is not a terminal)")
        if not typer.confirm("Send them?"):
            raise fail("nothing sent", EXIT_NOTHING)
    ags.init(service_name=PROBE_SERVICE, store=target, instrument=False)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        endpoint = Endpoint(base_url, model, api_key)
        measured = run_probe(endpoint, sizes, concurrency, max_seconds, recorded=recorded)
    except openai.OpenAIError as exc:
        raise fail(f"the endpoint {base_url} failed: {type(exc).__name__}: {exc}") from None
    finally:
        instrumentor.uninstrument()
        ags.shutdown()
    if len(measured) < 2:
        raise fail(f"only {len(measured)} call(s) finished within --max-seconds {max_seconds:g}: no profile")
    fitted = fit_profile(
        name or f"{model.replace('/', '-')}-measured", model, measured, base_url, concurrency
    )
    path = output or Path(f"{fitted.name}.toml")
    Console().print(probe_table(fitted, measured))  # on screen first: a path that fails loses no figure
    with output_file(path) as handle:
        handle.write(fitted.to_toml())
    console.print(f"wrote {path}; use it with: agentscope blame --target {path}", highlight=False)


@app.command()
def profiles() -> None:
    """The candidate profiles shipped for --target, with each figure's source."""
    table = Table(
        box=None, title="candidate profiles (--target NAME, or --target FILE.toml)", title_justify="left"
    )
    for column in ("name", "kind", "date", "figures", "sources"):
        table.add_column(column, no_wrap=column != "sources")
    for profile in load_profiles().values():
        figures = ", ".join(f"{name} {figure.value:g}" for name, figure in profile.figures.items())
        sources = "; ".join(figure.source for figure in profile.figures.values())
        table.add_row(profile.name, profile.kind, profile.date, figures, sources)
    console = Console()
    console.print(table)
    console.print(
        "Figures a preset leaves out count as 0 (optimistic): for a full prediction, give --target a profile "
        "file with your own measured figures. "
        "Per-request comparisons without token counts are chip presets (--chip): "
        + ", ".join(sorted(load_presets())),
        highlight=False,
    )


def main() -> None:
    """The console script; an unexpected error is one line on stderr (AGENTSCOPE_DEBUG=1: the traceback)."""
    try:
        app()
    except (KeyboardInterrupt, Exception) as exc:
        if is_interrupt(exc):
            Console(stderr=True).print("[red]interrupted[/red]", highlight=False)
            sys.exit(130)
        if os.environ.get("AGENTSCOPE_DEBUG") == "1":
            raise
        Console(stderr=True).print(
            f"[red]internal error:[/red] {type(exc).__name__}: {exc} (AGENTSCOPE_DEBUG=1 shows where)",
            highlight=False,
        )
        sys.exit(1)
