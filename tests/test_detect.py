"""Format detection by the first whole record, whatever comes before its identifying keys.

Real exports put prompts before the keys that say what they are: LangChain's
tracer writes a run's ``inputs`` and ``outputs`` (100 KB and more) before its
``run_type``; a Langfuse observation may carry its ``input`` before
``traceId``.  Every format is tried here with a first record far larger than
any read buffer, in every container its producers write, gzip too.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import zipfile
from pathlib import Path

import pytest
from traces_fixtures import agent_trace_otlp, delimited, jaeger_document, sdk_task_spans, zipkin_spans

from agentscope.ingest import detect, ingest, sources
from agentscope.store import Store

PROMPT = "Summarise the ticket history below.\n" + "lorem ipsum dolor sit amet " * 8_000  # 216 KB
TRACE = "01a230a8-9ba7-710f-9f16-beb5c64f98c5"
ROOT = "01a230a8-9ba7-710f-9f16-beb5c64f98c5"
LLM = "01a230a8-9bbf-7685-b1c1-c7275dcd7623"
TOOL = "01a230a8-9bd0-7c33-8a51-0f3b1d3e4a7b"


def _run(run_id: str, run_type: str, name: str, parent: str | None, start: str, end: str) -> dict:
    """A run as LangSmith stores it, create then patch merged: identity and inputs, then the update."""
    return {
        "id": run_id,
        "name": name,
        "start_time": f"2026-12-01T08:00:{start}Z",
        "run_type": run_type,
        "parent_run_id": parent,
        "trace_id": TRACE,
        "dotted_order": f"20261201T080000000000Z{TRACE}",
        "extra": {"invocation_params": {"model": "gpt-oss-120b"}} if run_type == "llm" else {},
        "inputs": {"messages": [[{"role": "user", "content": PROMPT}]]},
        "session_name": "support-agent",
        "outputs": {"generations": [[{"text": PROMPT[:50_000]}]]},
        "end_time": f"2026-12-01T08:00:{end}Z",
        "events": [],
    }


RUNS = [
    _run(ROOT, "chain", "LangGraph", None, "00.000000", "02.000000"),
    _run(LLM, "llm", "ChatOpenAI", ROOT, "00.100000", "01.300000"),
    _run(TOOL, "tool", "search_kb", ROOT, "01.400000", "01.900000"),
]

# The key orders producers write: the store's merge of create then patch puts the prompts before
# run_type (the real export that was refused had it 5,002 bytes into its first line); an update
# that re-sends the whole run puts them first of all; identity first is the easy case.
FIRST = ("inputs", "outputs", "extra", "events")
RUN_ORDERS = {
    "merged": ["id", "name", "inputs", "outputs", "run_type", "start_time", "end_time"],
    "prompts_first": list(FIRST),
    "identity_first": ["id", "run_type", "start_time", "trace_id", "parent_run_id"],
}


def _ordered(item: dict, first: list[str]) -> dict:
    head = {key: item[key] for key in first if key in item}
    return {**head, **{key: value for key, value in item.items() if key not in head}}


def _observation(obs_id: str, kind: str, name: str, parent: str | None, start: str, end: str) -> dict:
    return {
        "id": obs_id,
        "traceId": "b2c3d4e5f60718293a4b5c6d7e8f9012",
        "type": kind,
        "name": name,
        "startTime": f"2026-12-01T08:00:{start}Z",
        "endTime": f"2026-12-01T08:00:{end}Z",
        "parentObservationId": parent,
        "input": [{"role": "user", "content": PROMPT}],
        "output": {"role": "assistant", "content": PROMPT[:30_000]},
        "model": "gpt-oss-120b" if kind == "GENERATION" else None,
        "usageDetails": {"input": 40_000, "output": 5_000} if kind == "GENERATION" else {},
        "level": "DEFAULT",
        "environment": "default",
    }


OBSERVATIONS = [
    _observation("a1b2c3d4e5f60718", "AGENT", "support", None, "00.000000", "02.000000"),
    _observation("a1b2c3d4e5f60719", "GENERATION", "chat", "a1b2c3d4e5f60718", "00.100000", "01.300000"),
    _observation("a1b2c3d4e5f6071a", "TOOL", "search_kb", "a1b2c3d4e5f60718", "01.400000", "01.900000"),
]
OBSERVATION_ORDERS = {
    "input_first": ["input", "output", "id"],
    "as_the_api_returns": ["id", "traceId", "type", "name", "startTime"],
}


def _container(items: list[dict], container: str, envelope: str) -> bytes:
    if container == "lines":
        return b"".join(json.dumps(item).encode() + b"\n" for item in items)
    if container == "array":
        return json.dumps(items).encode()
    if container == "page":
        return json.dumps({envelope: items, "meta": {"page": 1, "totalItems": len(items)}}).encode()
    if container == "page_meta_first":
        return json.dumps({"meta": {"page": 1}, envelope: items}, indent=2).encode()
    raise AssertionError(container)


def _write(tmp_path: Path, data: bytes, zipped: bool) -> Path:
    path = tmp_path / ("export.gz" if zipped else "export.json")
    if zipped:
        with gzip.open(path, "wb") as out:
            out.write(data)
    else:
        path.write_bytes(data)
    return path


def _ingested(path: Path) -> tuple[object, dict[str, str]]:
    with Store(None) as store:
        summary = ingest(store, [path])
        kinds = dict(store.con.execute("SELECT name, kind FROM spans").fetchall())
    return summary, kinds


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("container", ["lines", "array", "page", "page_meta_first"])
@pytest.mark.parametrize("order", list(RUN_ORDERS))
def test_langsmith_runs_with_prompts_before_run_type(order, container, zipped, tmp_path):
    runs = [_ordered(run, RUN_ORDERS[order]) for run in RUNS]
    data = _container(runs, container, "runs")
    if order != "identity_first":
        assert data.index(b'"run_type"') > 200_000  # past every buffer a peek could see
    path = _write(tmp_path, data, zipped)
    summary, kinds = _ingested(path)
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {"langsmith": 1}
    assert kinds == {"LangGraph": "step", "ChatOpenAI": "llm", "search_kb": "tool"}


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("container", ["lines", "array", "page", "page_meta_first"])
@pytest.mark.parametrize("order", list(OBSERVATION_ORDERS))
def test_langfuse_observations_with_input_before_trace_id(order, container, zipped, tmp_path):
    observations = [_ordered(o, OBSERVATION_ORDERS[order]) for o in OBSERVATIONS]
    data = _container(observations, container, "data")
    if order == "input_first":
        assert data.index(b'"traceId"') > 200_000
    summary, kinds = _ingested(_write(tmp_path, data, zipped))
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {"langfuse": 1}
    assert kinds == {"support": "agent", "chat": "llm", "search_kb": "tool"}


def _big_otlp() -> dict:
    document = agent_trace_otlp()
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].insert(0, {"key": "input.value", "value": {"stringValue": PROMPT}})
    return document


def _big_jaeger() -> dict:
    document = jaeger_document()
    trace = document["data"][0]
    big = {"p0": {"serviceName": "research-agent", "tags": [{"key": "note", "value": PROMPT}]}}
    document["data"][0] = {"processes": {**trace["processes"], **big}, **trace}  # processes first
    return document


def _big_zipkin() -> list[dict]:
    spans = zipkin_spans()
    spans[0] = {"tags": {**spans[0]["tags"], "note": PROMPT}, **spans[0]}  # tags before traceId
    return spans


def _delimited() -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = sdk_task_spans(2, {"gen_ai.operation.name": "chat", "p": PROMPT})
    messages = [encode_spans(spans[k : k + 2]).SerializeToString() for k in (0, 2)]
    assert len(messages[0]) > 200_000
    return delimited(messages)


LARGE_FIRST_RECORDS = {
    "otlp-json-lines": lambda: (json.dumps(_big_otlp()) + "\n").encode() * 2,
    "otlp-json": lambda: json.dumps(_big_otlp(), indent=2).encode(),
    "otlp-json-array": lambda: json.dumps([_big_otlp(), agent_trace_otlp()]).encode(),
    "otlp-proto-delimited": _delimited,
    "jaeger": lambda: json.dumps(_big_jaeger()).encode(),
    "jaeger-trace": lambda: json.dumps(_big_jaeger()["data"][0]).encode(),
    "zipkin": lambda: json.dumps(_big_zipkin()).encode(),
}


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("fmt", list(LARGE_FIRST_RECORDS))
def test_every_format_is_told_by_a_large_first_record(fmt, zipped, tmp_path):
    data = LARGE_FIRST_RECORDS[fmt]()
    assert detect(io.BufferedReader(io.BytesIO(data))) == fmt
    summary, kinds = _ingested(_write(tmp_path, data, zipped))
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {fmt: 1}
    assert {"task", "agent"} & set(kinds.values())


TEXT_FORMATS = {
    **{fmt: make for fmt, make in LARGE_FIRST_RECORDS.items() if fmt != "otlp-proto-delimited"},
    "langsmith": lambda: _container(RUNS, "lines", "runs"),
    "langfuse": lambda: _container(OBSERVATIONS, "page", "data"),
}
# How Windows tools save text: PowerShell 5's "> file" writes UTF-16 LE with a byte-order mark,
# Out-File -Encoding utf8 and Notepad a UTF-8 mark; the others for completeness.
ENCODINGS = {
    "utf8-bom": lambda text: codecs.BOM_UTF8 + text,
    "utf16-le": lambda text: codecs.BOM_UTF16_LE + text.decode().encode("utf-16-le"),
    "utf16-be": lambda text: codecs.BOM_UTF16_BE + text.decode().encode("utf-16-be"),
    "utf32": lambda text: text.decode().encode("utf-32"),
}


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
@pytest.mark.parametrize("fmt", list(TEXT_FORMATS))
def test_text_saved_with_a_byte_order_mark_reads_as_utf8(fmt, encoding, zipped, tmp_path):
    data = TEXT_FORMATS[fmt]()
    _, plain = _ingested(_write(tmp_path, data, False))
    summary, kinds = _ingested(_write(tmp_path, ENCODINGS[encoding](data), zipped))
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {fmt: 1}
    assert kinds == plain and len(kinds) >= 3


def test_utf16_text_cut_inside_a_character_keeps_its_whole_lines_and_says_where(tmp_path):
    line = json.dumps(agent_trace_otlp()) + "\n"
    path = tmp_path / "spans.jsonl"
    path.write_bytes((line * 2).encode("utf-16")[:-1])
    summary, kinds = _ingested(path)
    assert len(kinds) == 3 and summary.already_stored == 3
    assert [(p.line, p.reason) for p in summary.problems] == [
        (3, "the UTF-16 text is broken (truncated data) after line 2; the lines before it were kept")
    ]


def test_a_first_line_that_is_not_json_gives_way_to_the_next_and_is_reported(tmp_path):
    lines = [json.dumps(run) for run in RUNS]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(["{cut short", *lines]) + "\n")
    summary, kinds = _ingested(path)
    assert dict(summary.formats) == {"langsmith": 1}
    assert [(p.line, p.reason.split(":")[0]) for p in summary.problems] == [(1, "invalid JSON")]
    assert len(kinds) == 3


def test_a_first_record_past_the_bound_is_refused_with_the_bound_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "FIRST_RECORD_MAX", 1 << 20)
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps({"inputs": "x" * (2 << 20), "run_type": "llm"}) + "\n")
    summary, kinds = _ingested(path)
    assert not kinds and not summary.ok
    (problem,) = summary.problems
    assert problem.file == str(path) and problem.line == 0
    assert problem.reason == (
        "cannot read: its first record is larger than 1 MiB, the most read to tell a file's format"
    )


def _zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("spans.jsonl", data)
    return buffer.getvalue()


def _report(data: bytes) -> bytes:
    """A terminal report saved to a file: UTF-8 text, box drawing and accents, no JSON."""
    return "│ p95 2.4 s — résumé ╰──╯\n".encode() * 20


@pytest.mark.parametrize(
    ("pack", "reason"),
    [
        (_zipped, "a zip archive: agentscope reads plain and gzip files; unpack it first"),
        (bz2.compress, "a bzip2 file: agentscope reads plain and gzip files; unpack it first"),
        (lzma.compress, "an xz file: agentscope reads plain and gzip files; unpack it first"),
        (_report, "a text file that is not JSON"),
    ],
    ids=["zip", "bzip2", "xz", "utf8-text"],
)
def test_archives_and_text_are_named_not_read_as_protobuf(pack, reason, tmp_path):
    path = tmp_path / "export.bin"
    path.write_bytes(pack((json.dumps(agent_trace_otlp()) + "\n").encode()))
    summary, _ = _ingested(path)
    assert [(p.line, p.reason) for p in summary.problems] == [(0, f"cannot read: {reason}")]


def test_an_array_of_otlp_requests_names_a_bad_request_by_its_place(tmp_path):
    path = tmp_path / "requests.json"
    request = agent_trace_otlp()
    path.write_text(json.dumps([request, {"resourceSpans": "no"}]))
    summary, kinds = _ingested(path)
    assert dict(summary.formats) == {"otlp-json-array": 1}
    assert [(p.line, p.reason.split(":")[0]) for p in summary.problems] == [(2, "malformed OTLP request")]
    scopes = [scope for resource in request["resourceSpans"] for scope in resource["scopeSpans"]]
    sent = [span["name"] for scope in scopes for span in scope["spans"]]
    assert summary.stored == len(sent) and set(kinds) == set(sent)


LANGFUSE_TRACE = {
    "id": "t-1",
    "timestamp": "2026-12-01T09:00:00.000Z",
    "name": "support",
    "htmlPath": "/project/p/traces/t-1",
    "latency": 2.1,
    "observations": ["o-1", "o-2"],
}
"""A row of Langfuse's traces (its traces table's export, /api/public/traces): no span times in it."""
LANGFUSE_TRACES = "Langfuse traces, which hold no span times: export their observations instead"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('[{"name": "x", "tags": {}}, {"traceId": "a"}]', "its keys: name, tags"),
        ("[1, 2]", "its keys: not an object"),
        ('{"data": [{"a": 1, "b": 2}], "meta": {}}', "a page (data) whose first element is none of"),
        ('{"data": [{"a": 1, "b": 2}], "meta": {}}', "its keys: a, b"),
        (json.dumps({"data": [LANGFUSE_TRACE], "meta": {"page": 1}}), LANGFUSE_TRACES),
        (json.dumps([LANGFUSE_TRACE]), LANGFUSE_TRACES),
        (json.dumps(LANGFUSE_TRACE) + "\n", LANGFUSE_TRACES),
        ('{"inputs": {"a": 1}, "outputs": [1, 2]}\n', "its keys: inputs, outputs"),
        ('{"name": "x", "tags": ["a"]', "cannot be read"),  # cut inside its only record
    ],
)
def test_a_json_object_of_no_known_format_names_what_it_saw(text, reason, tmp_path):
    path = tmp_path / "other.json"
    path.write_text(text)
    summary, _ = _ingested(path)
    (problem,) = summary.problems
    assert problem.reason.startswith("cannot read: ") and reason in problem.reason


def _delimited_of_size(size: int) -> bytes:
    """A length-delimited OTLP stream whose first request is exactly ``size`` bytes (padded by an
    attribute), so its first bytes are the varint of ``size``."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    def request(padding: int) -> bytes:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("producer")
        with (
            tracer.start_as_current_span("task", attributes={"agentscope.kind": "task"}),
            tracer.start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat", "p": "x" * padding}
            ),
        ):
            pass
        return encode_spans(exporter.get_finished_spans()).SerializeToString()

    padding = size // 2
    for _ in range(5):  # nested lengths' varints grow with the padding: close in on the size
        message = request(padding)
        if len(message) == size:
            return delimited([message, request(10)])
        padding += size - len(message)
    raise AssertionError(f"no request of {size} bytes")


def test_protobuf_whose_first_bytes_look_like_a_byte_order_mark_is_read_as_protobuf(tmp_path):
    """A first request of 32,639 bytes starts the stream with FF FE (UTF-16's mark): it is no text."""
    data = _delimited_of_size(32_639)
    assert data.startswith(codecs.BOM_UTF16_LE)
    summary, kinds = _ingested(_write(tmp_path, data, False))
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {"otlp-proto-delimited": 1} and set(kinds) == {"task", "chat"}
