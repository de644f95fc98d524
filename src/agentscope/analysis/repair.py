"""Repair the trees other people's instrumentation writes, before the critical path walks them (DESIGN §5.1).

Peers lose context in known ways.  The one repaired here is the **enclosed
sibling**: LangGraph runs a node (``call_model``) and, inside it, the runnable
the node calls (``RunnableSequence`` → ``ChatOpenAI``); both OpenInference's and
OpenLLMetry's LangChain instrumentation record the node as a childless span
*beside* the runnable instead of above it.  The node ends a little after the
runnable, so the walk takes the node and the model call falls off the path.

Rule: under one parent, a span A with no children, of an orchestration kind
(task, agent, step), whose interval contains a sibling B's interval, while B's
subtree holds llm/tool/db/http spans — B (with its subtree) becomes A's child.
Of several such A, the shortest (then the earliest) takes B.

Limit: a leaf step that truly ran in parallel with B (a thread that did its own
untraced work while B ran) is treated as waiting for B, so the time they shared
goes to B's categories instead of the step's cpu/other.

The second rule is the **same call** (DESIGN §14): two packages in one process
each record the same LLM request (OpenInference's ``ChatOpenAI`` run around
agentscope's ``chat`` span, Langfuse's ``OpenAI-generation`` beside it).  LLM
spans of one trace that share an instant (each overlaps every other), whose
models agree (the same, or one of them without a model), none of which is the
provider's own record (a SERVER span, or under one), and which are each other's
echo — recorded by different instrumentation scopes, or one inside the other in
the tree (a request does not hold another request: LlamaIndex records
``OpenAILike.achat`` twice, a decorator's span around the method's) — are one call.  The innermost record (the
shortest) stands for it: it is nearest the wire and holds the attempts and the
stream.  Each other record becomes a step around it (its own time is the
wrapper's, not the model's), and what the innermost one lacks — token counts,
server timings, time to first token (moved to its own start) and the model — is
taken from the nearest record that has it.  The call is then counted once: its
time, its tokens, its calls.

A token count of 0 yields to another record's count: OpenLLMetry writes zeros for a
response it could not read.  Records that do not nest are made to first: a record
that ended while another record of the call, begun inside it, went on (OpenLLMetry's
record of a stream read through ``with_streaming_response``, ended when the SDK
handed back the response, beside the SDK's own record of the whole stream) is
extended to that record's end (``early-end``).

Limit: two truly concurrent requests to one model in one trace, running at the
same time, recorded by different packages (one call recorded only by
OpenInference, the other only by agentscope), are read as one call.  Two calls
recorded by the same package are only when one is inside the other.

The third rule is the **early end**: OpenInference's LlamaIndex instrumentation
ends a streamed call's span (``OpenAILike.astream_chat``) when the generator is
handed back, a millisecond after it starts; the stream is read afterwards, inside
the workflow step that asked for it, and the span's first-token event comes long
after the span's end.  An llm span whose own first token, or one of whose
children (the HTTP request, agentscope's own record of the stream), ends after
it (or after the span it records the call with: LlamaIndex records
``astream_chat`` twice, nested), or that ends before the first token of the llm
span it is nested in, as that span's only llm record (a peer patched below
agentscope ends its record of a raw-response stream at the headers), cannot have
recorded its whole call.  It is
extended to the end of its parent when the parent is an orchestration span
(task, agent, step) or another llm record, that did nothing else after the span
began (other children, like the request's preparation, ended before) — the step
that read the stream — and otherwise to the latest of those ends and first
tokens.

Limit: the step's own work after the stream ended (parsing the answer, say) is
counted as the call's decode; a span extended only to its first token still
leaves the decode it did not record to its parent.

The early end has a second shape, the **stream-end log**: Logfire's LLM-provider
instrumentations (openai, anthropic) end a streamed call's span when the SDK
hands back the stream, and log its end — usage, and how long the stream took —
as a record of no duration beside it.  An llm record of no duration whose latest-ending earlier
sibling (same parent) is an llm record of the same model, with no first token of
its own and nothing else begun between them, is read as that call's end: the
call is extended to it (``early-end``), takes what it lacks from it (tokens, the
model), and the log is a record of the call, not a call (``same-call``).

Limit: a call recorded with no duration (a cache hit, in an export of
millisecond resolution) right after another call of its model under the same
parent, with nothing begun between them, is read as the earlier call's end.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from agentscope.analysis.trace import Trace

ENCLOSED_SIBLING = "enclosed-sibling"
SAME_CALL = "same-call"
EARLY_END = "early-end"
ORCHESTRATION_KINDS = frozenset({"task", "agent", "step"})
WORK_KINDS = frozenset({"llm", "tool", "db", "http"})


class Repair(NamedTuple):
    """One span moved under a new parent (``same-call``: a record of the call ``new_parent`` stands for;
    ``early-end``: a span extended to the end of ``new_parent``, its parent, or of itself)."""

    span: int
    rule: str
    new_parent: int


CALL_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "server_queue_ms",
    "server_prefill_ms",
    "server_decode_ms",
    "server_total_ms",
)
"""What a record standing for a call takes from the call's other records where it has none (the time
to first token too, moved to its own start)."""
TOKEN_FIELDS = frozenset(CALL_FIELDS[:3])


def _model(trace: Trace, i: int) -> str | None:
    """The call's model, or None when its record names none (its label is only its span name)."""
    row = trace.rows[i]
    label = trace.batch["label"][row]
    return None if label is None or label == trace.batch["name"][row] else label


def _provider_side(trace: Trace, i: int) -> bool:
    """Whether span ``i`` is the provider's SERVER span or under one: the provider's record of a call."""
    span_kinds, rows, parent = trace.batch["span_kind"], trace.rows, trace.parent
    while i != -1:
        if span_kinds[rows[i]] == "SERVER":
            return True
        i = parent[i]
    return False


def _echoes(trace: Trace, a: int, b: int) -> bool:
    """Whether records ``a`` and ``b`` can be two records of one call (DESIGN §14): from different scopes,
    or one an ancestor of the other."""
    scopes, rows = trace.batch["scope"], trace.rows
    scope_a, scope_b = scopes[rows[a]], scopes[rows[b]]
    if scope_a is not None and scope_b is not None and scope_a != scope_b:
        return True
    return _is_ancestor(trace, a, b) or _is_ancestor(trace, b, a)


def _is_ancestor(trace: Trace, a: int, b: int) -> bool:
    parent = trace.parent
    while (b := parent[b]) != -1:
        if b == a:
            return True
    return False


def _same_call_groups(trace: Trace) -> list[list[int]]:
    """LLM records of one instant and one model, in start order; groups of two or more.

    A record joins a group only if it starts before the group's earliest end, which is no later than
    the end of the record before it; so calls that each start after the one before has ended (an
    agent's calls, one after another) make no group, and nothing more is looked up (the providers,
    models and scopes of every call cost a tenth of the walk of a trace without repairs)."""
    start, end = trace.start, trace.end
    calls = [i for i, k in enumerate(trace.kind) if k == "llm"]
    calls.sort(key=lambda i: (start[i], -end[i]))
    if all(end[a] <= start[b] for a, b in pairwise(calls)):
        return []
    calls = [i for i in calls if not _provider_side(trace, i)]
    groups: list[list[int]] = []
    group: list[int] = []
    shared_end = 0
    model: str | None = None
    for i in calls:
        mine = _model(trace, i)
        if (
            group
            and start[i] < shared_end
            and (mine is None or model is None or mine == model)
            and all(_echoes(trace, i, member) for member in group)
        ):
            group.append(i)
            shared_end = min(shared_end, end[i])
            model = model or mine
            continue
        if len(group) > 1:
            groups.append(group)
        group, shared_end, model = [i], end[i], mine
    if len(group) > 1:
        groups.append(group)
    return groups


def same_calls(trace: Trace) -> list[Repair]:
    """Apply the same-call rule to ``trace`` in place (its kinds, labels and ``merged``); the repairs."""
    if trace.kind.count("llm") < 2:
        return []
    repairs: list[Repair] = []
    batch, rows, start, end = trace.batch, trace.rows, trace.start, trace.end
    for group in _same_call_groups(trace):
        repairs += _cut_short(trace, group)
        call = min(group, key=lambda i: (end[i] - start[i], -start[i]))
        others = sorted((i for i in group if i != call), key=lambda i: end[i] - start[i])
        for o in others:  # the nearest record first: what it has is taken before a farther one's
            _fold(trace, call, o)
        if batch["ttft_s"][rows[call]] is None:
            for o in others:
                ttft = batch["ttft_s"][rows[o]]
                if ttft is not None:
                    first_token = max(0.0, ttft - (start[call] - start[o]) / 1e9)
                    trace.merged.setdefault(call, {})["ttft_s"] = first_token
                    break
        for o in others:
            trace.kind[o] = "step"
            repairs.append(Repair(o, SAME_CALL, call))
    return repairs


def _cut_short(trace: Trace, group: list[int]) -> list[Repair]:
    """Extend each record of one call that ended while another record of it, begun inside it, went on
    (a peer's record ended when the SDK handed back a raw response, before its body was read) to the
    latest such end; the records then nest, and the innermost is the call.  The repairs."""
    start, end = trace.start, trace.end
    repairs: list[Repair] = []
    for a in group:
        later = max((end[b] for b in group if start[a] < start[b] and end[b] > end[a]), default=None)
        if later is not None:
            end[a] = later
            repairs.append(Repair(a, EARLY_END, a))
    return repairs


def _read_by(trace: Trace, p: int, i: int) -> bool:
    """Whether ``p`` read span ``i``'s stream: an orchestration span, or another record of the same call,
    that did nothing else after ``i`` began (its other children ended before, like LlamaIndex's request
    preparation)."""
    if p == -1 or (trace.kind[p] not in ORCHESTRATION_KINDS and trace.kind[p] != "llm"):
        return False
    began, end = trace.start[i], trace.end
    return all(end[c] <= began for c in trace.children[p] if c != i)


def _depth(parent: list[int], i: int) -> int:
    depth = 0
    while (i := parent[i]) != -1:
        depth += 1
    return depth


def _fold(trace: Trace, call: int, record: int) -> None:
    """What ``call`` lacks (tokens, server timings, the model) and ``record``, another record of it, has.

    A token count of 0 where another record of the call counted some is lacking too: the record never
    saw the usage (OpenLLMetry writes zeros for a response it could not read)."""
    batch, rows = trace.batch, trace.rows
    merged = trace.merged.setdefault(call, {})
    for column in CALL_FIELDS:
        value = batch[column][rows[record]]
        own = batch[column][rows[call]]
        if value is not None and (own is None or (own == 0 and column in TOKEN_FIELDS)):
            merged.setdefault(column, value)
    if not merged:
        del trace.merged[call]
    if _model(trace, call) is None and _model(trace, record) is not None:
        trace.label[call] = trace.label[record]


def _stream_end_logs(trace: Trace, calls: list[int]) -> list[Repair]:
    """Fold each stream-end log (an llm record of no duration) into the call it ends, extending that call
    to it; the repairs."""
    start, end, parent, children = trace.start, trace.end, trace.parent, trace.children
    ttfts, rows = trace.batch["ttft_s"], trace.rows
    repairs: list[Repair] = []
    for log in calls:
        p = parent[log]
        if start[log] != end[log] or p == -1:
            continue
        at = start[log]
        earlier = [c for c in children[p] if c != log and start[c] <= at]
        if not earlier:
            continue
        call = max(earlier, key=lambda c: (end[c], start[c]))
        if (
            trace.kind[call] != "llm"
            or end[call] > at
            or start[call] == end[call]
            or ttfts[rows[call]] is not None
            or any(end[call] <= start[c] for c in earlier if c != call)
        ):
            continue
        models = {_model(trace, log), _model(trace, call)} - {None}
        if len(models) > 1:
            continue
        end[call] = at
        _fold(trace, call, log)
        trace.kind[log] = "step"
        repairs += [Repair(call, EARLY_END, call), Repair(log, SAME_CALL, call)]
    return repairs


def early_ends(trace: Trace) -> list[Repair]:
    """Apply the early-end rule to ``trace`` in place (its ends); the repairs.

    What each llm span must cover is found inner spans first (a record around
    another takes the inner one's first token and children); the ends are then
    set outer spans first, so an inner record can take its outer one's new end."""
    kind = trace.kind
    if "llm" not in kind:
        return []
    rows, start, end, parent, children = trace.rows, trace.start, trace.end, trace.parent, trace.children
    ttfts = trace.batch["ttft_s"]

    def only_call(p: int) -> bool:  # an llm record holding several calls is not a record of each
        return sum(kind[c] == "llm" for c in children[p]) == 1

    def own_need(i: int) -> int:  # max() of a generator cost a fifth of this rule on every trace
        ttft = ttfts[rows[i]]
        need = start[i] + round(ttft * 1e9) if ttft is not None else 0
        if end[i] > need:
            need = end[i]
        for c in children[i]:
            if end[c] > need:
                need = end[c]
        p = parent[i]
        if p != -1 and kind[p] == "llm" and (outer := ttfts[rows[p]]) is not None and only_call(p):
            first_token = start[p] + round(outer * 1e9)  # inside another record of its call
            if first_token > need:
                need = first_token
        return need

    calls = [i for i, k in enumerate(kind) if k == "llm"]
    repairs: list[Repair] = []
    if any(start[i] == end[i] for i in calls):
        repairs += _stream_end_logs(trace, calls)
        calls = [i for i in calls if kind[i] == "llm"]
    if all(own_need(i) <= end[i] for i in calls):  # the common case: every call recorded whole
        return repairs
    calls.sort(key=lambda i: -_depth(parent, i))
    needed: dict[int, int] = {}
    for i in calls:
        needed[i] = max(own_need(i), end[i], *(needed.get(c, end[c]) for c in children[i]))
    for i in reversed(calls):
        if needed[i] <= end[i]:
            continue
        p = parent[i]
        if _read_by(trace, p, i) and end[p] >= needed[i]:
            end[i] = end[p]
            repairs.append(Repair(i, EARLY_END, p))
        else:
            end[i] = needed[i]
            repairs.append(Repair(i, EARLY_END, i))
    return repairs


def _holds_work(kind: list[str], parent: list[int], handoffs: list[int]) -> list[bool]:
    """For each span, whether its subtree holds an llm/tool/db/http span (walking up from each)."""
    holds = [False] * len(kind)
    cut = set(handoffs)
    for i, k in enumerate(kind):
        if k not in WORK_KINDS:
            continue
        current = i
        while current != -1 and not holds[current]:
            holds[current] = True
            if current in cut:
                break
            current = parent[current]
    return holds


def enclosed_siblings(
    start: list[int],
    end: list[int],
    kind: list[str],
    parent: list[int],
    children: list[list[int]],
    handoffs: list[int],
) -> list[Repair]:
    """Apply the enclosed-sibling rule in place (``parent`` and ``children``); the repairs made."""
    repairs: list[Repair] = []
    holds: list[bool] | None = None
    for kids in children:
        if len(kids) < 2:
            continue
        hosts = [a for a in kids if not children[a] and kind[a] in ORCHESTRATION_KINDS]
        if not hosts:
            continue
        if holds is None:
            holds = _holds_work(kind, parent, handoffs)
        hosts.sort(key=lambda a: (end[a] - start[a], start[a]))
        moved = []
        for b in kids:
            if not holds[b]:
                continue
            begins, ends = start[b], end[b]
            for a in hosts:  # a loop, not next() of a generator: this runs for most spans of a trace
                if start[a] <= begins and ends <= end[a]:
                    moved.append((b, a))
                    break
        for b, host in moved:
            kids.remove(b)
            children[host].append(b)
            parent[b] = host
            repairs.append(Repair(b, ENCLOSED_SIBLING, host))
    return repairs
