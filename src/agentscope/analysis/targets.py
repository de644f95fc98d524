"""A task re-simulated on candidate endpoints: each LLM call takes the time a profile predicts (DESIGN §12).

For every LLM call with both token counts, its recorded time — its own time and
its successful transport (the HTTP attempt, the provider's own span), not failed
attempts or backoff — is replaced by the profile's prediction from its tokens.
The what-if simulation (``whatif.simulate_batch``) then keeps the happens-before
rules: whatever waited for the call moves with it, parallel calls stay parallel.
A call without token counts keeps its time and is counted.

A measured profile draws each call's time from the spread its probe measured
(``CandidateProfile.sample_ms``), the draw fixed by the call's trace and span ids
and the profile's name: the same traces give the same prediction on every run
and engine, and the slowest tasks meet the slow calls that a busy engine
really serves.

Limit: the time a caller spent between a stream's chunks (outside the stream's
iterator) is scaled with the call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from agentscope.analysis.attribution import FAILED_MIX, Mix, union_ns
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.trace import Trace


def _call_spans(trace: Trace, call: int, mixes: dict[int, Mix]) -> list[int]:
    """The call and the spans under it that are the call itself (not failed attempts or backoff)."""
    kind = trace.kind
    found = [call]
    stack = list(trace.children[call])
    while stack:
        d = stack.pop()
        if mixes.get(d) is FAILED_MIX or kind[d] == "backoff":
            continue
        found.append(d)
        stack.extend(trace.children[d])
    return found


def _recorded_ns(trace: Trace, call: int, mixes: dict[int, Mix]) -> int:
    """The call's time that a faster endpoint would replace: its span less failed attempts and backoff."""
    lo, hi = trace.start[call], trace.end[call]
    excluded = [
        (max(trace.start[c], lo), min(trace.end[c], hi))
        for c in trace.children[call]
        if (mixes.get(c) is FAILED_MIX or trace.kind[c] == "backoff")
        and min(trace.end[c], hi) > max(trace.start[c], lo)
    ]
    return (hi - lo) - union_ns(excluded)


def target_overrides(
    trace: Trace,
    spans: Sequence[int],
    mixes: dict[int, Mix],
    provider_side: set[int],
    targets: Sequence[CandidateProfile],
) -> tuple[dict[int, list[float | None]], int]:
    """Per span, the new time per old time under each target; and the calls without token counts."""
    overrides: dict[int, list[float | None]] = {}
    missing = 0
    for i in spans:
        if trace.kind[i] != "llm" or i in provider_side:
            continue
        inputs, outputs = trace.call("input_tokens", i), trace.call("output_tokens", i)
        if inputs is None or outputs is None:
            missing += 1
            continue
        recorded = _recorded_ns(trace, i, mixes)
        if recorded <= 0:
            continue
        call = f"{trace.batch['trace_id'][trace.rows[i]]}:{trace.span_id(i)}"
        factors: list[float | None] = [
            target.sample_ms(inputs, outputs, _draw(call, target.name)) * 1e6 / recorded for target in targets
        ]
        for span in _call_spans(trace, i, mixes):
            overrides[span] = factors
    return overrides, missing


def _draw(call: str, target: str) -> float:
    """A number in [0, 1) fixed by the call and the target, the same in every process."""
    digest = hashlib.blake2b(f"{target}/{call}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
