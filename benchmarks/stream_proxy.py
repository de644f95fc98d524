"""The stream proxy's own cost per chunk, on real openai chunks, apart from the SDK.

    python benchmarks/stream_proxy.py [--rounds 1] [--label NAME]

Counting a whole streamed call (call_instructions.py) moves with the memory
layout by more than the proxy costs: the SDK allocates and frees a pydantic
model per chunk.  Here the chunks are parsed once, from the same stream the
simulated provider writes (a role chunk, 200 content chunks, the finish and
usage chunks), and the proxy's generator (``_timed_chunks``, with the openai
dialect's reader) runs over them; the figure is its time a chunk less a plain
loop's over the same list.  A round is the best of 9 repeats of 200 loops.
Trees are compared by running this in turn with each first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import timeit
import types

from agentscope.integrations import _stainless
from agentscope.integrations.openai import _seen
from call_instructions import stream
from openai.types.chat import ChatCompletionChunk

from agentscope.sdk.recording import LLMCall


def per_chunk_ns() -> float:
    """One round: the proxy's time a chunk, less a plain loop's, in ns."""
    chunks = [
        ChatCompletionChunk.model_validate(json.loads(event[len(b"data: ") :])) for event in stream(200)[:-1]
    ]
    dialect = _stainless.Dialect("openai", (), _seen)
    state = types.SimpleNamespace(headers=None)

    def proxied() -> None:
        tracked = _stainless.StreamState(None, LLMCall(None), state, 0, time.thread_time_ns(), dialect)
        for _ in _stainless._timed_chunks(tracked, chunks):
            pass

    def plain() -> None:
        for _ in iter(chunks):
            pass

    def best(loop: types.FunctionType) -> float:
        return min(timeit.repeat(loop, number=200, repeat=9)) / 200 / len(chunks) * 1e9

    return best(proxied) - best(plain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--label", default="this tree")
    args = parser.parse_args()
    rounds = [per_chunk_ns() for _ in range(args.rounds)]
    print(f"| {args.label} | {min(rounds):.0f} | {statistics.median(rounds):.0f} |")


if __name__ == "__main__":
    main()
