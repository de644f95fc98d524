"""What ``ags.init()`` costs a process at start: time, the libraries it imports, the install it needs.

    python benchmarks/startup.py [--runs 20] [--against OLD_CHECKOUT/src]

Each case is a fresh ``python -c`` process, run ``--runs`` times in turn with the
others (so all see the same machine); the table gives the median wall time and
its excess over ``python -c pass``.  Then the third-party modules each case has
imported when it ends, and the size on disk of what each install of agentscope
pulls in (the base install, and each extra), as installed in this environment.  ``--against`` runs the
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
        "ags.init(), then a function decorated (wrapt loads)": f"{init}\n@ags.task\ndef f():\n    pass",
        "import openai (an app's own start)": "import openai",
        "import openai, then ags.init()": f"import openai\n{init}",
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


def _requirement_name(requirement: str) -> tuple[str, tuple[str, ...]]:
    """A requirement's distribution name and the extras it asks for: ``a[b,c]>=1`` → (a, (b, c))."""
    spec = requirement.split(";")[0].strip()
    name = spec
    for stop in "[<>=!~ (":
        name = name.split(stop)[0]
    extras = tuple(e.strip() for e in spec.split("[", 1)[1].split("]")[0].split(",")) if "[" in spec else ()
    return name.strip(), extras


def _installed_mb(name: str, seen: set[str], extras: tuple[str, ...] = ()) -> float:
    """Size of distribution ``name`` with ``extras`` and of what they require, each counted once."""
    key = name.lower().replace("_", "-")
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return 0.0
    size = 0.0
    if key not in seen:
        seen.add(key)
        size += sum(f.size or 0 for f in dist.files or ()) / 1e6
    for requirement in dist.requires or ():
        marker = requirement.split(";", 1)[1] if ";" in requirement else ""
        wanted = "extra ==" not in marker or any(f'extra == "{extra}"' in marker for extra in extras)
        if not wanted or ("python_version" in marker and "extra" not in marker):
            continue
        dependency, its_extras = _requirement_name(requirement)
        if dependency.lower() == key and its_extras:  # agentscope[cli] inside agentscope[ui]
            size += _installed_mb(name, seen, its_extras)
        elif dependency.lower().replace("_", "-") not in seen or its_extras:
            size += _installed_mb(dependency, seen, its_extras)
    return size


EXTRAS = ("cli", "ui", "serve", "probe", "demo", "all")


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
    print("\n| install | MB on disk, with what it requires (as installed here) |")
    print("|---|---:|")
    print(f"| `pip install agentscope` (recording) | {_installed_mb('agentscope', set()):.0f} |")
    for extra in EXTRAS:
        print(f"| `pip install 'agentscope[{extra}]'` | {_installed_mb('agentscope', set(), (extra,)):.0f} |")


if __name__ == "__main__":
    main()
