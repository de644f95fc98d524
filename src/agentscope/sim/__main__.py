"""``python -m agentscope.sim``: run the simulated provider in the foreground."""

from __future__ import annotations

import argparse
import sys

try:
    import uvicorn
except ImportError:
    sys.exit("error: the simulated provider needs agentscope's 'demo' extra: pip install 'agentscope[demo]'")

from agentscope.sim.profile import TIMING_DIALECTS, Profile
from agentscope.sim.server import app_for

parser = argparse.ArgumentParser(description="A simulated OpenAI-compatible provider on loopback.")
parser.add_argument("--port", type=int, default=8088)
parser.add_argument("--queue-ms", type=float, default=Profile.queue_ms)
parser.add_argument("--prefill-ms", type=float, default=Profile.prefill_ms)
parser.add_argument("--prefill-tokens-per-s", type=float, default=Profile.prefill_tokens_per_s)
parser.add_argument("--prefill-quadratic-ms", type=float, default=Profile.prefill_quadratic_ms)
parser.add_argument("--tokens-per-s", type=float, default=Profile.tokens_per_s)
parser.add_argument("--decode-context-ms", type=float, default=Profile.decode_context_ms)
parser.add_argument("--batch-slowdown", type=float, default=Profile.batch_slowdown)
parser.add_argument("--capacity", type=int, default=Profile.capacity)
parser.add_argument("--output-tokens", type=int, default=Profile.output_tokens)
parser.add_argument("--timings", choices=TIMING_DIALECTS, default=Profile.timings)
args = parser.parse_args()
profile = Profile(
    queue_ms=args.queue_ms,
    prefill_ms=args.prefill_ms,
    prefill_tokens_per_s=args.prefill_tokens_per_s,
    prefill_quadratic_ms=args.prefill_quadratic_ms,
    tokens_per_s=args.tokens_per_s,
    decode_context_ms=args.decode_context_ms,
    batch_slowdown=args.batch_slowdown,
    capacity=args.capacity,
    output_tokens=args.output_tokens,
    timings=args.timings,
)
print(f"simulated provider on http://127.0.0.1:{args.port}/v1", flush=True)
uvicorn.run(app_for(profile), host="127.0.0.1", port=args.port, log_level="warning")
