"""Which category each instant of a task belongs to (DESIGN §4).

Every span in a task gets a *mix*: the fractions of its own time that belong to
each component key.  A tool's mix is all ``tool``; an LLM call's mix comes from
the provider's server timings, its time to first token, or neither; a task,
agent or step splits its self time into ``cpu`` and ``other`` by the CPU it
used.  A critical-path segment on a span then contributes its length times the
span's mix, so the category times of a task sum to its wall time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from agentscope.analysis import categories as C
from agentscope.analysis.trace import Trace

Mix = tuple[tuple[str, float], ...]
"""(component key, fraction) pairs whose fractions sum to 1."""

FIXED_MIX: dict[str, Mix] = {
    "tool": (("tool", 1.0),),
    "db": (("db", 1.0),),
    "http": (("network", 1.0),),
    "queue": ((C.QUEUE_CLIENT, 1.0),),
    "backoff": ((C.BACKOFF, 1.0),),
}
FAILED_MIX: Mix = ((C.FAILED, 1.0),)
OPERATION_KINDS = {"tool": "tool", "llm": "inference", "db": "db", "http": "network"}
"""Span kinds that are named operations in the report, and their category."""


_TIMINGS = ("server_queue_ms", "server_prefill_ms", "server_decode_ms", "server_total_ms")
_NO_TIMINGS = (None,) * len(_TIMINGS)
_timing_columns = itemgetter(*_TIMINGS)


def provider_span(trace: Trace, i: int) -> int | None:
    """The provider's own span of LLM call ``i``, if the provider traced it into the same trace.

    A server that joins the call's trace (vLLM and SGLang do, given the
    ``traceparent`` the integrations send) records a SERVER span under the call,
    or under its HTTP attempt; its timings are the call's server timings.
    """
    span_kinds, rows, kind = trace.batch["span_kind"], trace.rows, trace.kind
    for c in trace.children[i]:
        if span_kinds[rows[c]] == "SERVER":
            return c
        if kind[c] == "http":
            for g in trace.children[c]:
                if span_kinds[rows[g]] == "SERVER":
                    return g
    return None


def _timings_of(trace: Trace, i: int, provider: int | None) -> Sequence[float | None]:
    """Call ``i``'s server timings (``_TIMINGS`` order, ns): its own (as ``Trace.call`` reads them), else
    its provider span's.  Read column by column here, not through ``Trace.call``: every LLM call's split
    asks, twice with an HTTP attempt under it; and most calls have none, which is told before any
    conversion.  A negative or non-finite timing is no timing: a proxy's garbage must not turn the call's
    time into network."""
    queue, prefill, decode, total = _timing_columns(trace.batch)
    row = trace.rows[i]
    own = (queue[row], prefill[row], decode[row], total[row])
    if trace.merged and None in own:
        supplied = trace.merged.get(i, {})
        own = tuple(supplied.get(column) if value is None else value for column, value in zip(_TIMINGS, own))
    if provider is not None and own == _NO_TIMINGS:
        row = trace.rows[provider]
        own = (queue[row], prefill[row], decode[row], total[row])
    if own == _NO_TIMINGS:
        return own
    return [float(value) * 1e6 if value is not None and 0 <= value < math.inf else None for value in own]


def llm_components(
    trace: Trace,
    i: int,
    duration: int,
    before_first_token: int = 0,
    provider: int | None = None,
    own: bool = False,
) -> list[tuple[str, float]]:
    """The LLM split of DESIGN §4 for ``duration`` ns of call ``i``, in ns; ``caller`` is the caller's.

    ``duration`` is the call's own time (its children — failed attempts, backoff
    sleeps — are blamed on their own); ``before_first_token`` is how much of that
    children's time came before the first token, so the time to first token
    counts only the call's own part.  ``provider`` is the provider's own span
    (:func:`provider_span`), whose timings stand in for missing ones; with one,
    the call's ``own`` time, outside the provider's span, is all transport.
    """
    if duration <= 0:
        return [(C.UNSPLIT, 0.0)]
    batch = trace.batch
    own_row = trace.rows[i]
    wait = batch["stream_wait_ns"][own_row]
    caller = (
        min(float(max(0, trace.end[i] - trace.start[i] - wait)), float(duration)) if wait is not None else 0.0
    )
    inner = duration - caller
    queue, prefill, decode, total = _timings_of(trace, i, provider)
    ttft = trace.call("ttft_s", i)
    parts: list[tuple[str, float]]
    if provider is not None and own:
        parts = [("network", inner)]
    elif prefill is not None or decode is not None or (queue is not None and total is None):
        q, p, d = queue or 0.0, prefill or 0.0, decode or 0.0
        server = q + p + d
        if server > inner:
            scale = inner / server
            q, p, d = q * scale, p * scale, d * scale
        parts = [(C.QUEUE_PROVIDER, q), (C.PREFILL, p), (C.DECODE, d), ("network", inner - (q + p + d))]
    elif total is not None:
        q = min(queue or 0.0, inner)
        unsplit = min(total, inner - q)
        parts = [(C.QUEUE_PROVIDER, q), (C.UNSPLIT, unsplit), ("network", inner - q - unsplit)]
    elif ttft is not None:
        first = min(max(0.0, float(ttft) * 1e9 - before_first_token), inner)
        parts = [(C.UNSPLIT, first), (C.DECODE, inner - first)]
    else:
        parts = [(C.UNSPLIT, inner)]
    if caller > 0:
        parts.append(("caller", caller))
    return parts


def _as_mix(parts: Sequence[tuple[str, float]], parent_mix: Mix | None) -> Mix:
    if len(parts) == 1 and parts[0][0] != "caller":  # all of it one key (x / x is exactly 1.0)
        return ((parts[0][0], 1.0),)
    total = sum(ns for _, ns in parts)
    if total <= 0:
        return ((parts[0][0], 1.0),)
    out: dict[str, float] = {}
    for key, ns in parts:
        if ns <= 0:
            continue
        if key == "caller":
            for parent_key, fraction in parent_mix or (("other", 1.0),):
                out[parent_key] = out.get(parent_key, 0.0) + ns / total * fraction
        else:
            out[key] = out.get(key, 0.0) + ns / total
    return tuple(out.items())


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """How much time the intervals cover together (overlaps counted once)."""
    covered = 0
    current_start = current_end = None
    for s, e in sorted(intervals):
        if current_end is None or s > current_end:
            if current_end is not None:
                covered += current_end - current_start
            current_start, current_end = s, e
        elif e > current_end:
            current_end = e
    if current_end is not None:
        covered += current_end - current_start
    return covered


def _children_within(trace: Trace, i: int) -> list[tuple[int, int]]:
    """Span ``i``'s children clipped to it, those left with any time: (start, end) each.  In locals and
    conditionals, not ``max()`` and ``min()``: the cpu/other split of every step and the own time of
    every call ask, and they have many children."""
    start, end = trace.start, trace.end
    s, e = start[i], end[i]
    intervals = []
    for c in trace.children[i]:
        cs, ce = start[c], end[c]
        if cs < s:
            cs = s
        if ce > e:
            ce = e
        if ce > cs:
            intervals.append((cs, ce))
    return intervals


def _cpu_mix(trace: Trace, i: int) -> Mix:
    """cpu/other split of a task/agent/step's self time by its own CPU share."""
    first, cpus, threads = trace.rows.start, trace.batch["cpu_ns"], trace.batch["thread_id"]
    cpu = cpus[first + i]
    if cpu is None:
        return (("other", 1.0),)
    thread = threads[first + i]
    own_cpu = cpu
    if thread is not None:
        for c in trace.children[i]:
            if threads[first + c] == thread:
                own_cpu -= cpus[first + c] or 0
    self_ns = trace.end[i] - trace.start[i] - union_ns(_children_within(trace, i))
    if self_ns <= 0 or own_cpu <= 0:
        return (("other", 1.0),)
    share = min(1.0, own_cpu / self_ns)
    if share >= 1.0:
        return (("cpu", 1.0),)
    return (("cpu", share), ("other", 1.0 - share))


def failed_attempts(trace: Trace, spans: Sequence[int]) -> set[int]:
    """Attempts that failed and were retried (DESIGN §4).

    A span that ended in error and was followed, under the same parent, by
    another attempt of the same operation (same name, or a higher attempt
    number).  Under an LLM call, an HTTP attempt that ended in error while the
    call went on past it — something under the call started after it, or the
    call itself did not fail — even when the successful attempt has no span of
    its own (the usual single 429: the SDK's retry is inside the call).
    """
    failed: set[int] = set()
    status, attempts, codes = trace.batch["status"], trace.batch["attempt"], trace.batch["http_status"]
    rows, labels, kind, start, end = trace.rows, trace.label, trace.kind, trace.start, trace.end
    # Most traces have no span that ended in error: told by scans of their rows, before any walk.
    any_error = "ERROR" in status[rows.start : rows.stop]
    if not any_error and not any(code >= 400 for code in filter(None, codes[rows.start : rows.stop])):
        return failed
    for i in spans:
        kids = trace.children[i]
        if not kids:
            continue
        # Ended in error: status ERROR, or an HTTP status of 400 or more.
        errors = [
            c
            for c in kids
            if status[rows[c]] == "ERROR" or ((code := codes[rows[c]]) is not None and code >= 400)
        ]
        if not errors:
            continue
        call_succeeded = kind[i] == "llm" and status[rows[i]] != "ERROR"
        for c in errors:
            key = labels[c]
            attempt = attempts[rows[c]]
            transport = kind[i] == "llm" and kind[c] == "http"
            if transport and call_succeeded:
                failed.add(c)
                continue
            for other in kids:
                if other == c or start[other] < end[c]:
                    continue
                other_attempt = attempts[rows[other]]
                if (
                    transport
                    or labels[other] == key
                    or (attempt is not None and other_attempt is not None and other_attempt > attempt)
                ):
                    failed.add(c)
                    break
    return failed


def _own_time(trace: Trace, i: int) -> tuple[int, int]:
    """Span ``i``'s time not covered by its children, and how much of the children's
    time came before its first token (for LLM calls)."""
    s, e = trace.start[i], trace.end[i]
    intervals = _children_within(trace, i)
    if not intervals:
        return e - s, 0
    ttft = trace.call("ttft_s", i)
    first = s + int(ttft * 1e9) if ttft is not None else s
    before = union_ns([(a, min(b, first)) for a, b in intervals if a < first])
    return (e - s) - union_ns(intervals), before


class Mixes(NamedTuple):
    own: dict[int, Mix]
    """Each span's mix of its own time."""
    leaves: set[int]
    """Spans whose subtree takes their mix (failed attempts, transport HTTP, the provider's spans)."""
    between: dict[int, Mix]
    """For some spans, the mix of their own time *between* children (an LLM call's time between
    its HTTP attempts is backoff)."""
    provider_side: set[int]
    """Spans the provider recorded of an LLM call (its SERVER span and what is under it): part of
    the call, not calls, tokens or operations of their own."""


BACKOFF_MIX: Mix = ((C.BACKOFF, 1.0),)


def span_mixes(trace: Trace, spans: Sequence[int]) -> Mixes:
    """The mix of every span in ``spans`` (parents first), and the spans treated as leaves.

    A failed attempt and everything under it is ``retry.failed``; an HTTP span
    directly under an LLM call is that call's transport and takes the call's
    split, and so does the provider's own span of the call (:func:`provider_span`);
    an LLM call's own time (what its children do not cover) is split by
    its server timings or time to first token, except between its attempts,
    where it was sleeping before a retry, and except that with a provider span
    the time outside it is transport.
    Such a span is a leaf: what runs under it takes its mix, so attribution and
    what-if treat it alike.
    """
    failed = failed_attempts(trace, spans)
    mixes: dict[int, Mix] = {}
    leaves: set[int] = set()
    between: dict[int, Mix] = {}
    providers: dict[int, int | None] = {}
    """LLM call → the provider's own span of it, if any."""
    provider_side: set[int] = set()
    kind, parent = trace.kind, trace.parent
    for i in spans:
        p = parent[i]
        if p in leaves:
            mixes[i] = mixes[p]
            leaves.add(i)
            if p in provider_side:
                provider_side.add(i)
            continue
        if i in failed:
            mixes[i] = FAILED_MIX
            leaves.add(i)
            continue
        k = kind[i]
        if p != -1 and kind[p] == "llm" and (k == "http" or providers.get(p) == i):
            # The call's transport, or the provider's own span of it: split like the call.
            duration = trace.end[i] - trace.start[i]
            mixes[i] = _as_mix(llm_components(trace, p, duration, 0, providers.get(p)), mixes.get(parent[p]))
            leaves.add(i)
        elif k == "llm":
            providers[i] = provider = provider_span(trace, i)
            if provider is not None:
                provider_side.add(provider)
            own, before_first = _own_time(trace, i)
            parts = llm_components(trace, i, own, before_first, provider, own=True)
            mixes[i] = _as_mix(parts, mixes.get(p))
            if any(kind[c] == "http" for c in trace.children[i]):
                between[i] = BACKOFF_MIX
        elif k in FIXED_MIX:
            mixes[i] = FIXED_MIX[k]
        else:
            mixes[i] = _cpu_mix(trace, i)
    return Mixes(mixes, leaves, between, provider_side)
