"""A coding agent: a loop of dependent model calls with short tool steps between them.

Each task plans with the model, then for 8–15 turns asks the model what to do
next, reads a file or runs a small command, and feeds the result back.  Every
call waits for the one before, so model latency multiplies: a faster inference
chip helps this agent a lot.

    python -m agentscope.examples.coding_agent --tasks 10 --concurrency 4
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

import openai
from agentscope.examples._common import main_for, provider, run_tasks

import agentscope as ags
from agentscope.sim import Profile

PROFILE = Profile(queue_ms=10, prefill_ms=50, tokens_per_s=350, output_tokens=30, jitter=0.2)


@ags.tool("read_file")
def read_file(path: Path) -> str:
    return path.read_text()


@ags.tool("run_command")
def run_command(code: str) -> str:
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=30)
    return done.stdout


@ags.step
def apply_edit(source: str, suggestion: str) -> str:
    return source + f"\n# {suggestion[:40]}"


def run(tasks: int = 10, concurrency: int = 4, base_url: str | None = None) -> None:
    """Solve ``tasks`` small coding tasks."""
    with tempfile.TemporaryDirectory() as tmp, provider(base_url, PROFILE) as llm_url:
        repo = Path(tmp)
        for n in range(5):
            (repo / f"module_{n}.py").write_text(f"def f{n}(x):\n    return x + {n}\n")
        client = openai.OpenAI(base_url=llm_url, api_key="sim")

        def ask(history: list[dict]) -> str:
            reply = client.chat.completions.create(model="gpt-oss-120b", messages=history, max_tokens=30)
            return reply.choices[0].message.content or ""

        @ags.task("fix_bug")
        def fix_bug(i: int) -> None:
            history = [{"role": "user", "content": f"fix issue {i}"}]
            history.append({"role": "assistant", "content": ask(history)})
            for turn in range(random.randint(8, 15)):
                path = repo / f"module_{turn % 5}.py"
                source = read_file(path)
                if turn % 3 == 2:
                    output = run_command(f"print({turn} * 2)")
                    history.append({"role": "tool", "content": output})
                suggestion = ask([*history, {"role": "user", "content": source}])
                apply_edit(source, suggestion)
                history.append({"role": "assistant", "content": suggestion})

        run_tasks(fix_bug, tasks, concurrency)


if __name__ == "__main__":
    main_for(run, __doc__.splitlines()[0], tasks=10, concurrency=4)
