"""``--chip NAME`` presets: published latency comparisons turned into speedup factors.

The presets live in ``chips.toml`` beside this module, each with the figures it
was computed from and where they were reported.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from agentscope.analysis.whatif import Scenario


@dataclass(frozen=True)
class ChipPreset:
    name: str
    description: str
    speedups: dict[str, float]
    figures: str
    source: str
    verification: str

    def scenario(self) -> Scenario:
        return Scenario(f"chip {self.name}", self.speedups)


def load_presets() -> dict[str, ChipPreset]:
    """Every preset shipped with agentscope, by name."""
    text = resources.files("agentscope.analysis").joinpath("chips.toml").read_text(encoding="utf-8")
    data: dict[str, Any] = tomllib.loads(text)
    return {
        name: ChipPreset(
            name=name,
            description=entry["description"],
            speedups={k: float(v) for k, v in entry["speedups"].items()},
            figures=entry["figures"],
            source=entry["source"],
            verification=entry["verification"],
        )
        for name, entry in data["presets"].items()
    }
