"""The DuckDB reader of OTLP JSON lines stores exactly the rows the Python reader would."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from readers import both_readers
from traces_fixtures import dumps, otlp_request

from agentscope import attributes as A
from agentscope.classify import ALIASES, FIRST_TOKEN_EVENTS, LANGFUSE_FIRST_TOKEN, LANGFUSE_USAGE, VALUE_RULES
from agentscope.ingest import otlp_duckdb
from agentscope.ingest.otlp import read_json_lines

TRACE = "0af7651916cd43dd8448eb211c80319c"

KEYS = sorted(
    {key for key, _ in VALUE_RULES}
    | {theirs for theirs, _, _ in ALIASES}
    | {ours for _, ours, _ in ALIASES}
    | {"agentscope.cpu_ns", "agentscope.thread.id", "http.request.method", "db.system.name", "openai.api_key"}
    | {"gen_ai.provider.name", "user.note", "retries"}
)
RULE_VALUES = sorted({value for _, table in VALUE_RULES for value in table} | {"CHAIN", "nonsense"})

primitive = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.sampled_from(RULE_VALUES) | st.text(max_size=8)),
    st.builds(lambda v: {"intValue": str(v)}, st.integers(-(2**40), 2**40)),
    st.builds(lambda v: {"intValue": v}, st.integers(0, 10**6)),
    st.builds(lambda v: {"doubleValue": v}, st.floats(-1e6, 1e6, allow_nan=False)),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
)
value = primitive | st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(primitive, max_size=3))
odd_time = st.sampled_from(["", "12a", "١٢٣", "99999999999999999999999", "-5", " 7", 1.5e9, True, None])


usage_key = st.sampled_from(
    ["input", "output", "total", "prompt_tokens", "completionTokens", "input_cache_read", "Input"]
)
count = st.integers(-10, 10**6) | st.none()
details = st.dictionaries(usage_key | st.just("cached_tokens"), count | st.booleans(), max_size=2)
"""OpenAI's token details, which Langfuse writes into its usage objects."""
usage_text = st.one_of(
    st.builds(
        lambda usage, compact: json.dumps(usage, separators=(",", ":") if compact else None),
        st.dictionaries(usage_key, count | st.floats(0, 1e4) | st.booleans() | details, max_size=4),
        st.booleans(),
    ),
    st.sampled_from(
        [
            '{"input": 5, "input": 7}',
            '{"input": 007}',
            "[1]",
            "5",
            "{not json",
            ' {"input": 1}',
            '{"input":1e2}',
            '{"input": NaN}',
            '{"input":-0}',
            '{"input": 99999999999999999999}',
            '{"input":\f1}',
        ]
    ),
)
"""Langfuse usage objects as its SDK writes them, and as it does not."""
zone = (
    st.none()
    | st.just(timezone.utc)
    | st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))
)
started_text = st.one_of(
    st.builds(
        lambda moment, z: json.dumps(moment.isoformat().replace("+00:00", "Z" if z else "+00:00")),
        st.datetimes(datetime(1000, 1, 1), datetime(9999, 12, 31), timezones=zone),
        st.booleans(),
    ),
    st.sampled_from(
        [
            '"2025-02-30T00:00:00"',
            '"2025-01-01T24:00:00"',
            '"2025-01-01T00:00:00.123Z"',
            '"2025-01-01 00:00:00"',
            '"yesterday"',
            "not json",
            '"0999-01-01T00:00:00"',
            '"2025-01-01T00:00:60"',
            '"2025-01-01T00:00:00.1234567"',
        ]
    ),
)
"""Langfuse completion start times as its SDK writes them, and as it does not."""


@st.composite
def events(draw: st.DrawFn, start: int) -> list[dict]:
    """Span events, first-token marks among them, with times as exporters write them and odd ones."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(-(10**9), 10**10).map(lambda offset: max(0, start + offset)))
        time = draw(st.sampled_from([str(at), at]) | odd_time)
        event = {"name": draw(st.sampled_from([*sorted(FIRST_TOKEN_EVENTS), "exception"]))}
        if time is not None:
            event["timeUnixNano"] = time
        out.append(event)
    return out


@st.composite
def spans(draw: st.DrawFn, number: int) -> dict:
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=6, unique=True))
    start = draw(st.integers(1, 10**18))
    span = {
        "traceId": draw(st.sampled_from([TRACE, TRACE.upper()])),
        "spanId": f"{number + 1:016x}",
        "name": draw(st.text(max_size=10)),
        "kind": draw(st.sampled_from([0, 1, 2, 3, 4, 5, "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", 9])),
        "startTimeUnixNano": draw(st.sampled_from([str(start), start])),
        "endTimeUnixNano": str(start + draw(st.integers(0, 10**9))),
        "attributes": [{"key": key, "value": draw(value)} for key in keys],
        "status": draw(st.sampled_from([{}, {"code": 2, "message": "boom"}, {"code": "STATUS_CODE_OK"}])),
        "events": draw(events(start)),
    }
    for key, text in ((LANGFUSE_USAGE, usage_text), (LANGFUSE_FIRST_TOKEN, started_text)):
        if draw(st.booleans()):
            span["attributes"].append({"key": key, "value": {"stringValue": draw(text)}})
    parent = draw(st.sampled_from([None, "", "0000000000000000", "00000000000000AA"]))
    if parent is not None:
        span["parentSpanId"] = parent
    return span


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4).flatmap(
        lambda sizes: st.tuples(
            *[st.tuples(*[spans(10 * i + j) for j in range(n)]) for i, n in enumerate(sizes)]
        )
    )
)
def test_every_row_the_duckdb_reader_takes_is_the_python_readers_row(requests):
    lines = [dumps(otlp_request(list(request))) for request in requests]
    fast, python, routed = both_readers(lines)
    for key, row in fast.items():
        assert row == python[key]
    assert len(fast) + sum(1 for key in python if key not in fast) == len(python)
    assert not routed or all(1 <= n <= len(lines) for n in routed)


RICH_KEYS = sorted(
    set(KEYS)
    | {
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.tool.call.id",
        "gen_ai.tool.description",
    }
    | {"db.query.text", "db.namespace", "url.full", "server.port", "http.response.status_code", "error.type"}
    | {"input.value", "llm.input_messages.0.message.content", "gen_ai.completion.0.content"}  # content
)
long_text = st.text(max_size=300) | st.sampled_from(['quote " and \\ backslash', "tab\tnew\nline", "é ☃ 😀"])
rich_value = (
    value
    | st.builds(lambda v: {"stringValue": v}, long_text)
    | st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False, allow_infinity=False))
)
resource = st.lists(
    st.sampled_from(["service.version", "host.name", "os.type", "telemetry.sdk.name"]), unique=True
)


@st.composite
def rich_requests(draw: st.DrawFn, line: int) -> dict:
    """A request shaped like real SDK output: many attributes a span, long values, a resource of several."""
    spans_ = []
    for j in range(draw(st.integers(1, 12))):
        keys = draw(st.lists(st.sampled_from(RICH_KEYS), min_size=4, max_size=9, unique=True))
        start = draw(st.integers(1, 10**18))
        spans_.append(
            {
                "traceId": f"{line + 1:032x}",
                "spanId": f"{j + 1:016x}",
                "parentSpanId": f"{j:016x}" if j else "",
                "name": draw(long_text),
                "kind": draw(st.integers(0, 5)),
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + draw(st.integers(0, 10**9))),
                "attributes": [{"key": key, "value": draw(rich_value)} for key in keys],
                "status": {},
            }
        )
    request = otlp_request(spans_, service=draw(long_text))
    extra = [{"key": key, "value": {"stringValue": draw(long_text)}} for key in draw(resource)]
    request["resourceSpans"][0]["resource"]["attributes"] += extra
    return request


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4).flatmap(lambda n: st.tuples(*[rich_requests(i) for i in range(n)])),
    st.booleans(),
)
def test_attribute_rich_lines_give_the_python_readers_rows_byte_for_byte(requests, keep_content):
    lines = [dumps(request) for request in requests]
    fast, python, _ = both_readers(lines, decoded=False, keep_content=keep_content)
    for key, row in fast.items():
        assert row == python[key]  # the attributes' JSON text too, not only what it decodes to
    assert len(fast) + sum(1 for key in python if key not in fast) == len(python)


def test_well_formed_lines_of_every_convention_are_taken_by_duckdb():
    attributes = [
        {"key": "llm.token_count.prompt", "value": {"intValue": "120"}},
        {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.25}},
        {"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
        {
            "key": "gen_ai.response.finish_reasons",
            "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}},
        },
        {"key": "openai.api_key", "value": {"stringValue": "sk-secret"}},
        {"key": "agentscope.thread.id", "value": {"intValue": "7"}},
    ]
    span = {
        "traceId": TRACE,
        "spanId": "00f067aa0ba902b7",
        "name": "retrieve",
        "kind": "SPAN_KIND_CLIENT",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": attributes,
    }
    fast, python, routed = both_readers([dumps(otlp_request([span]))])
    assert routed == [] and fast == python
    (row,) = fast.values()
    assert row["kind"] == "db" and row["thread_id"] == 7 and row["span_kind"] == "CLIENT"
    assert row["attributes"]["gen_ai.usage.input_tokens"] == 120
    assert row["attributes"][A.SERVER_QUEUE_MS] == 250
    assert "openai.api_key" not in row["attributes"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("OpenAILike._prepare_chat_with_tools", "step"), ("OpenAILike.achat", "llm"), ("_llm", "llm")],
)
def test_an_openinference_llm_span_named_after_a_private_method_is_a_step(name, kind):
    span = {
        "traceId": TRACE,
        "spanId": "00f067aa0ba902b7",
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000001000000",
        "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}],
    }
    fast, python, routed = both_readers([dumps(otlp_request([span]))])
    assert routed == [] and fast == python
    assert [row["kind"] for row in fast.values()] == [kind]


@pytest.mark.parametrize(
    "service_values",
    [
        [],
        [{"stringValue": "checkout"}],
        [{"intValue": "7"}],
        [{"boolValue": True}],
        [{"arrayValue": {"values": [{"stringValue": "a"}]}}],
        [{"stringValue": "first", "intValue": "2"}],
        [{"intValue": "7"}, {"stringValue": "second"}],
        [{"stringValue": "first"}, {"stringValue": "second"}],
    ],
)
def test_the_service_is_read_from_the_resource_as_the_python_reader_reads_it(service_values):
    span = {"traceId": TRACE, "spanId": "1" * 16, "name": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2}
    request = otlp_request([span])
    request["resourceSpans"][0]["resource"]["attributes"] = [
        {"key": "host.name", "value": {"stringValue": "h"}},
        *({"key": "service.name", "value": value} for value in service_values),
    ]
    fast, python, routed = both_readers([dumps(request)])
    assert routed == [] and fast == python


def test_a_string_longer_in_bytes_than_the_cut_goes_to_the_python_reader():
    limit = otlp_duckdb.MAX_ATTRIBUTE_BYTES
    span = {"traceId": TRACE, "name": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2}
    lines = [
        dumps(
            otlp_request(
                [
                    {
                        **span,
                        "spanId": f"{n:016x}",
                        "attributes": [{"key": "note", "value": {"stringValue": text}}],
                    }
                ]
            )
        )
        for n, text in enumerate(["é" * (limit // 2), "é" * (limit // 2 + 1), "a" * (limit + 1)], start=1)
    ]
    fast, python, routed = both_readers(lines)
    assert routed == [2, 3]  # over the limit in bytes; only the third is over it in characters
    assert [len(python[(TRACE, f"{n:016x}")]["attributes"]["note"]) for n in (1, 2, 3)] == [
        limit // 2,
        limit // 2 + 1,
        limit,
    ]
    assert fast == {key: python[key] for key in fast} and len(fast) == 1


def test_streamed_calls_first_token_events_are_read_by_duckdb():
    start = 1_700_000_000_000_000_000
    span = {
        "traceId": TRACE,
        "name": "chat",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 10**9),
    }
    chunk = "gen_ai.content.completion.chunk"
    openinference = {"name": "First Token Stream Event", "timeUnixNano": str(start + 180_000_000)}
    openllmetry = [
        {"name": chunk, "timeUnixNano": start + ms * 10**6, "attributes": []} for ms in (250, 240, 900)
    ]
    ours = {"key": "gen_ai.response.time_to_first_chunk", "value": {"doubleValue": 0.5}}
    lines = [
        dumps(otlp_request([{**span, "spanId": "1" * 16, "events": [openinference]}])),
        dumps(otlp_request([{**span, "spanId": "2" * 16, "events": openllmetry}])),
        dumps(otlp_request([{**span, "spanId": "3" * 16, "events": [openinference], "attributes": [ours]}])),
        dumps(
            otlp_request([{**span, "spanId": "4" * 16, "events": [{**openinference, "timeUnixNano": "١٢٣"}]}])
        ),
    ]
    fast, python, routed = both_readers(lines)
    assert routed == [4]  # digits other than ASCII ones: the Python reader decides
    assert fast == {key: python[key] for key in fast} and len(fast) == 3
    ttft = {
        span_id: row["attributes"].get("gen_ai.response.time_to_first_chunk")
        for (_, span_id), row in fast.items()
    }
    assert ttft == {"1" * 16: 0.18, "2" * 16: 0.24, "3" * 16: 0.5}


def test_langfuse_usage_and_first_token_as_its_sdk_writes_them_are_read_by_duckdb():
    start = 1_735_689_600_000_000_000  # 2025-01-01T00:00:00Z
    span = {"traceId": TRACE, "name": "OpenAI-generation", "startTimeUnixNano": str(start)}
    span["endTimeUnixNano"] = str(start + 10**9)

    def generation(span_id: str, usage: dict, started: str, *more: dict) -> str:
        attributes = [
            {"key": LANGFUSE_USAGE, "value": {"stringValue": json.dumps(usage)}},
            {"key": LANGFUSE_FIRST_TOKEN, "value": {"stringValue": json.dumps(started)}},
            *more,
        ]
        return dumps(otlp_request([{**span, "spanId": span_id, "attributes": attributes}]))

    ours = {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "3"}}
    lines = [
        generation("1" * 16, {"input": 12, "output": 80, "total": 92}, "2025-01-01T00:00:00.120000Z"),
        generation("2" * 16, {"prompt_tokens": 7, "input_cache_read": 2}, "2025-01-01T02:00:00.250000+02:00"),
        generation("3" * 16, {"input": 12}, "2025-01-01T00:00:01", ours),
        generation("4" * 16, {"input": 1.5}, "2025-01-01T00:00:00Z"),  # a fraction: left to Python
    ]
    fast, python, routed = both_readers(lines)
    assert routed == [4]
    assert fast == {key: python[key] for key in fast} and len(fast) == 3
    read = {
        span_id: [
            row["attributes"].get(f"gen_ai.{key}") for key in ("usage.input_tokens", "usage.output_tokens")
        ]
        + [
            row["attributes"].get(key)
            for key in ("gen_ai.usage.cache_read.input_tokens", "gen_ai.response.time_to_first_chunk")
        ]
        for (_, span_id), row in fast.items()
    }
    assert read == {
        "1" * 16: [12, 80, None, 0.12],
        "2" * 16: [7, None, 2, 0.25],
        "3" * 16: [3, None, None, 1.0],
    }


def test_value_kinds_the_query_does_not_read_send_their_line_to_the_python_reader_without_a_marker():
    span = {"traceId": TRACE, "name": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2}
    kvlist = {"kvlistValue": {"values": [{"key": "n", "value": {"intValue": "1"}}]}}
    as_bytes = {"bytesValue": "AAE="}
    where_read = [
        otlp_request([{**span, "spanId": "2" * 16, "attributes": [{"key": "m", "value": kvlist}]}]),
        otlp_request([{**span, "spanId": "3" * 16, "attributes": [{"key": "b", "value": as_bytes}]}]),
        otlp_request(
            [
                {
                    **span,
                    "spanId": "4" * 16,
                    "attributes": [{"key": "l", "value": {"arrayValue": {"values": [kvlist]}}}],
                }
            ]
        ),
    ]
    in_resource = otlp_request([{**span, "spanId": "5" * 16}])
    in_resource["resourceSpans"][0]["resource"]["attributes"].append({"key": "host", "value": kvlist})
    in_an_event = otlp_request(
        [
            {
                **span,
                "spanId": "6" * 16,
                "events": [{"name": "e", "attributes": [{"key": "m", "value": kvlist}]}],
            }
        ]
    )
    fast, python, routed = both_readers([dumps(r) for r in [*where_read, in_resource, in_an_event]])
    assert routed == [1, 2, 3, 4]
    assert python[(TRACE, "2" * 16)]["attributes"] == {"m": {"n": 1}}
    assert python[(TRACE, "3" * 16)]["attributes"] == {"b": "0001"}
    assert list(fast) == [(TRACE, "6" * 16)]  # neither reader reads an event's attributes
    assert fast[(TRACE, "6" * 16)] == python[(TRACE, "6" * 16)]


def test_lines_the_query_cannot_take_exactly_go_to_the_python_reader():
    good = otlp_request(
        [{"traceId": TRACE, "spanId": "1" * 16, "name": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2}]
    )
    kvlist = {"key": "m", "value": {"kvlistValue": {"values": []}}}
    repeated_key = [{"key": "a", "value": {"intValue": 1}}, {"key": "a", "value": {"intValue": 2}}]
    odd = [
        otlp_request(
            [
                {
                    **good["resourceSpans"][0]["scopeSpans"][0]["spans"][0],
                    "spanId": "2" * 16,
                    "attributes": [kvlist],
                }
            ]
        ),
        otlp_request(
            [
                {
                    **good["resourceSpans"][0]["scopeSpans"][0]["spans"][0],
                    "spanId": "3" * 16,
                    "attributes": repeated_key,
                }
            ]
        ),
        otlp_request(
            [{**good["resourceSpans"][0]["scopeSpans"][0]["spans"][0], "spanId": "4" * 16, "name": 5}]
        ),
    ]
    fast, python, routed = both_readers([dumps(good)] + [dumps(o) for o in odd] + ["{not json"])
    assert list(fast) == [(TRACE, "1" * 16)]
    assert routed == [2, 3, 4, 5]
    assert python[(TRACE, "3" * 16)]["attributes"] == {"a": 2}


def test_numbers_orjson_refuses_are_read_by_both_readers_alike():
    """``1e400`` is JSON, and ``NaN`` is what Python's ``json.dumps`` writes for a NaN: DuckDB reads both,
    orjson refuses them, the Python reader reads them with the standard library.  In a field neither
    reader reads, both take the span; as a double attribute the line goes to the Python reader, which
    stores it as it stores ``"Infinity"``; as a time, the Python reader names the fault and keeps the
    line's other span.  A lone surrogate stays refused by both."""
    span = {"traceId": TRACE, "name": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2}

    def line(span_id: str, **fields: object) -> str:
        return dumps(otlp_request([{**span, "spanId": span_id * 16, **fields}]))

    unread = [
        line("1", droppedAttributesCount="@").replace('"@"', "-1e400"),
        line("2", droppedAttributesCount="@").replace('"@"', "NaN"),
    ]
    attributes = [
        line("3", attributes=[{"key": "x", "value": {"doubleValue": "@"}}]).replace('"@"', "1e400"),
        line("4", attributes=[{"key": "x", "value": {"doubleValue": "@"}}]).replace('"@"', "NaN"),
        line("5", attributes=[{"key": "x", "value": {"doubleValue": "Infinity"}}]),
    ]
    time = dumps(
        otlp_request([{**span, "spanId": "6" * 16, "endTimeUnixNano": "@"}, {**span, "spanId": "7" * 16}])
    ).replace('"@"', "1e400")
    surrogate = line("8", name="@").replace('"@"', '"\\ud800"')
    fast, python, routed = both_readers([*unread, *attributes, time, surrogate])
    assert list(fast) == [(TRACE, "1" * 16), (TRACE, "2" * 16)]
    assert all(fast[key] == python[key] for key in fast)
    assert routed == [3, 4, 5, 6, 7]
    assert [python[(TRACE, n * 16)]["attributes"] for n in "345"] == [{"x": None}] * 3
    assert (TRACE, "6" * 16) not in python and (TRACE, "7" * 16) in python
    problems = [r.problem for r in read_json_lines(iter([surrogate.encode()]))]
    assert len(problems) == 1 and problems[0].startswith("invalid JSON") and "surrogate" in problems[0]


@pytest.mark.parametrize("where", ["resource", "scope", "span"])
@pytest.mark.parametrize("odd", [None, 5, "text", []])
def test_a_resource_scope_or_span_that_is_not_an_object_sends_its_whole_line_to_the_python_reader(where, odd):
    good_span = {"traceId": TRACE, "startTimeUnixNano": 1, "endTimeUnixNano": 2}
    request = otlp_request([{**good_span, "spanId": "1" * 16, "name": "kept"}])
    resource_spans = request["resourceSpans"]
    if where == "resource":
        resource_spans.append(odd)
    elif where == "scope":
        resource_spans[0]["scopeSpans"].append(odd)
    else:
        resource_spans[0]["scopeSpans"][0]["spans"].append(odd)
    other = otlp_request([{**good_span, "spanId": "2" * 16, "name": "other"}])
    fast, python, routed = both_readers([dumps(request), dumps(other)])
    assert routed == [1]
    assert list(fast) == [(TRACE, "2" * 16)]
    assert python[(TRACE, "1" * 16)]["name"] == "kept"  # the Python reader keeps the good span


def _one_span_lines(first: int, count: int) -> list[bytes]:
    return [
        (
            dumps(
                otlp_request(
                    [
                        {
                            "traceId": TRACE,
                            "spanId": f"{n:016x}",
                            "name": f"step {n}",
                            "startTimeUnixNano": 10 * n,
                            "endTimeUnixNano": 10 * n + 5,
                        }
                    ]
                )
            )
            + "\n"
        ).encode()
        for n in range(first, first + count)
    ]


def test_blocks_stream_through_one_query_and_come_back_each_with_its_own_rows():
    blocks = [(1, _one_span_lines(1, 3000)), (3001, _one_span_lines(3001, 5)), (3006, [b"\n", b"  \n"])]
    not_json = 3001 + 2
    blocks[1][1][2] = b'{"resourceSpans": [\n'
    blocks.append((3008, _one_span_lines(3008, 2500)))
    con = otlp_duckdb.connect_parser()
    try:
        parsed = list(otlp_duckdb.parse_blocks(con, iter(blocks)))
    finally:
        con.close()
    assert [(p.first, len(p.block)) for p in parsed] == [(first, len(block)) for first, block in blocks]
    for p in parsed:
        spans = [int(span_id, 16) for span_id in p.table.column("span_id").to_pylist()]
        assert p.lines == spans  # each line's span, in order, in its own block
        assert sorted(p.lines + p.routed) == list(range(p.first, p.first + len(p.block)))
    assert parsed[1].routed == [not_json]  # the rest of its block is still read by the query
    assert parsed[2].routed == [3006, 3007] and parsed[2].table.num_rows == 0


def test_a_parser_out_of_memory_leaves_the_blocks_to_the_python_reader_whole():
    blocks = [(1, _one_span_lines(1, 40)), (41, _one_span_lines(41, 40))]
    con = otlp_duckdb.connect_parser()
    try:
        con.execute("SET memory_limit = '1MB'")
        parsed = list(otlp_duckdb.parse_blocks(con, iter(blocks)))
    finally:
        con.close()
    assert [p.routed for p in parsed] == [list(range(1, 41)), list(range(41, 81))]
    assert all(p.table.num_rows == 0 for p in parsed)
