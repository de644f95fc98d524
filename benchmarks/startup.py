"""What ``ags.init()`` costs a process at start: time, the libraries it imports, the install it needs.

    python benchmarks/startup.py [--runs 20] [--against OLD_CHECKOUT/src]

Each case is a fresh ``python -c`` process, run ``--runs`` times in turn with the
others (so all see the same machine); the table gives the median wall time and
its excess over ``python -c pass``.  Then the third-party modules each case has
imported when it ends, and the size on disk of the distributions the base
install pulls in, as installed in this environment.  ``--against`` runs the
agentscope cases a second time with another checkout's ``src`` first on the path
(an earlier release, side by side in the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

WATCHED = ("openai", "anthropic", "duckdb", "pyarrow", "numpy", "pandas", "httpx", "opentelemetry.sdk.trace")


def cases(store: Path) -> dict[str, str]:
    init = f"import agentscope as ags; ags.init(service_name='x', store={str(store)!r})"
    return {
        "python -c pass": "pass",
        "import the OpenTelemetry SDK": "import opentelemetry.sdk.trace",
        "import agentscope": "import agentscope as ags; ags.task",
        "ags.init() with a store": init,
        "ags.init() then one span, stored": f"{init}\nwith ags.span('x'):\n    pass\nags.shutdown()",
    }


def _env(src: str | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": src} if src else dict(os.environ)


def _wall_s(code: str, src: str | None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=_env(src))
    return time.perf_counter() - started


def _imported(code: str, src: str | None) -> list[str]:
    report = f"import sys, json; print(json.dumps([m for m in {list(WATCHED)!r} if m in sys.modules]))"
    probe = f"{code}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=_env(src)
    )
    return json.loads(done.stdout.splitlines()[-1])


def _installed_mb(name: str, seen: set[str]) -> float:
    """Size of distribution ``name`` and of what it requires (without extras), each counted once."""
    key = name.lower().replace("_", "-")
    if key in seen:
        return 0.0
    seen.add(key)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return 0.0
    size = sum(f.size or 0 for f in dist.files or ()) / 1e6
    for requirement in dist.requires or ():
        if ";" in requirement:  # an extra's, or another Python's
            continue
        dependency = requirement.split(";")[0].split("[")[0]
        for stop in "<>=!~ (":
            dependency = dependency.split(stop)[0]
        size += _installed_mb(dependency.strip(), seen)
    return size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--against", help="another checkout's src folder, run side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runs = [(name, code, None) for name, code in cases(Path(folder) / "startup.duckdb").items()]
        if args.against:
            runs += [
                (f"{name} ({args.against})", code, args.against)
                for name, code, _ in runs
                if "agentscope" in code
            ]
        walls: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for _ in range(args.runs):
            for name, code, src in runs:
                walls[name].append(_wall_s(code, src))
        imports = {name: _imported(code, src) for name, code, src in runs}
    floor = statistics.median(walls["python -c pass"])
    print(f"| case | median ms ({args.runs} fresh processes) | over `python -c pass` | imported |")
    print("|---|---:|---:|---|")
    for name, values in walls.items():
        median = statistics.median(values)
        imported = ", ".join(imports[name]) or "—"
        print(f"| {name} | {median * 1000:.0f} | {(median - floor) * 1000:+.0f} | {imported} |")
    seen: set[str] = set()
    print(f"\nagentscope and what it requires, as installed here: {_installed_mb('agentscope', seen):.0f} MB")


if __name__ == "__main__":
    main()
