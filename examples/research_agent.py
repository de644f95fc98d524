"""A research agent: parallel searches, then one long-context answer streamed back.

Each task fans out five searches at once (only the slowest is on the critical
path), then sends everything found to the model in one long prompt — a long
prefill — and streams a long answer — a long decode.  Its p95 shows
parallelism on the critical path and the prefill/decode split.

    python -m agentscope.examples.research_agent --tasks 12 --concurrency 3
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import openai
from agentscope.examples._common import in_context, main_for, provider, run_tasks

import agentscope as ags
from agentscope.sim import Profile

PROFILE = Profile(queue_ms=30, prefill_ms=350, tokens_per_s=250, output_tokens=120, jitter=0.2)
SOURCES = ("arxiv", "news", "patents", "wiki", "forums")


@ags.tool("web_search")
def web_search(source: str, query: str) -> list[str]:
    time.sleep(random.uniform(0.08, 0.35))
    return [f"{source} result {n} for {query}" for n in range(20)]


@ags.step
def rank(results: list[list[str]]) -> list[str]:
    merged = [doc for docs in results for doc in docs]
    return sorted(merged, key=len)[:60]


def run(tasks: int = 12, concurrency: int = 3, base_url: str | None = None) -> None:
    """Answer ``tasks`` research questions."""
    with provider(base_url, PROFILE) as llm_url, ThreadPoolExecutor(max_workers=len(SOURCES) * 4) as searches:
        client = openai.OpenAI(base_url=llm_url, api_key="sim")

        @ags.task("research_question")
        def research(i: int) -> str:
            query = f"question {i}"
            with ags.span("search", kind="step"):
                futures = [searches.submit(in_context(web_search), source, query) for source in SOURCES]
                found = [f.result() for f in futures]
            context = rank(found)
            stream = client.chat.completions.create(
                model="gpt-oss-120b",
                messages=[
                    {"role": "system", "content": "\n".join(context)},
                    {"role": "user", "content": query},
                ],
                stream=True,
                stream_options={"include_usage": True},
            )
            return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

        run_tasks(research, tasks, concurrency)


if __name__ == "__main__":
    main_for(run, __doc__.splitlines()[0], tasks=12, concurrency=3)
