"""metrics.jsonl, a training run's log: one JSON object per line, appended and flushed as the run
goes ({"kind": "train" | "eval", "step", ...}). A line cut short by a kill is skipped on reading;
steps replayed after a resume first drop their old lines (`truncate_after`).

Imports no torch: `probe train-compare` reads logs without it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from txl.io import atomic_write, json_safe

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """metrics.jsonl: one JSON object per line, appended and flushed as the run goes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(json_safe(record), sort_keys=True, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
                out.append(json.loads(line))
        return out

    def truncate_after(self, step: int) -> None:
        """Keep only the records of steps <= `step` (before replaying the steps after it)."""
        keep = [r for r in self.records() if int(r.get("step", 0)) <= step]
        lines = (json.dumps(json_safe(r), sort_keys=True, allow_nan=False) + "\n" for r in keep)
        atomic_write(self.path, "".join(lines))

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""
