"""Grouping a file's rows into batches, and the problems found along the way (no store involved)."""

from __future__ import annotations

from dataclasses import dataclass

BATCH_ROWS = 20_000


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.reason}"


class Batcher:
    """Groups one file's rows into batches, dropping repeats within a batch (no store involved).

    A span repeated with the same content is counted as already stored; with other
    content it is a problem, and the first one is kept.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: list[tuple] = []
        self.lines: list[int] = []
        self.seen: dict[tuple[str, str], tuple] = {}
        self.problems: list[Problem] = []
        self.repeats = 0

    def add(self, row: tuple, line: int) -> bool:
        """Add a row; True when a batch is full and should be taken."""
        key = (row[0], row[1])
        signature = (row[2], row[3], row[6], row[7])
        previous = self.seen.get(key)
        if previous is not None:
            if previous != signature:
                reason = f"span {row[1]} appears twice with different content; kept the first"
                self.problems.append(Problem(self.name, line, reason))
            else:
                self.repeats += 1
            return False
        self.seen[key] = signature
        self.rows.append(row)
        self.lines.append(line)
        return len(self.rows) >= BATCH_ROWS

    def take(self) -> tuple[list[tuple], list[int]]:
        rows, lines = self.rows, self.lines
        self.rows, self.lines, self.seen = [], [], {}
        return rows, lines
