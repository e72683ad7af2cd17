"""metrics.jsonl, a training run's log: one JSON object per line, appended and flushed as the run
goes ({"kind": "train" | "eval", "step", ...}). A line cut short by a kill is skipped on reading;
steps replayed after a resume first drop their old lines (`truncate_after`).

A finished model directory keeps the log compact (`compact`): every evaluation record whole, every
`KEEP_EVERY`-th training record whole, and the per-step columns that a retrain is compared on
(loss, grad_norm) as one `train_columns` record of packed little-endian arrays — exact, since
they are float32 values, so `probe train-compare` still compares every step bit for bit. Reading
(`MetricsLog.records`, `expand`) turns that record back into one training record per step.

Imports no torch: `probe train-compare` reads logs without it."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from txl import files
from txl.io import atomic_write, json_safe

METRICS_FILE = "metrics.jsonl"
COLUMNS_KIND = "train_columns"
COLUMNS = ("loss", "grad_norm")  # what a retrain is compared on; the rest is kept every KEEP_EVERY
KEEP_EVERY = 100


def _pack(values: list[Any]) -> dict[str, str]:
    """Floats as float32 when every one is a float32 value (losses are), else float64; null (a
    non-finite value) as NaN."""
    import numpy as np

    x = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    f32 = x.astype(np.float32)
    exact = bool(np.array_equal(f32.astype(np.float64), x, equal_nan=True))
    dtype = "<f4" if exact else "<f8"
    return {"dtype": dtype, "data": base64.b64encode(x.astype(dtype).tobytes()).decode("ascii")}


def _unpack(packed: dict[str, str]) -> list[float | None]:
    import numpy as np

    arr = np.frombuffer(base64.b64decode(packed["data"]), dtype=np.dtype(packed["dtype"]))
    return [None if math.isnan(v) else v for v in arr.astype(np.float64).tolist()]


def compact(records: list[dict[str, Any]], keep_every: int = KEEP_EVERY) -> list[dict[str, Any]]:
    """The log of a finished model: evaluations and every `keep_every`-th training record whole
    (with the first and the last), every step's loss and grad_norm packed in one record."""
    train = [r for r in records if r.get("kind") == "train" and isinstance(r.get("step"), int)]
    if not train:
        return list(records)
    last = train[-1]["step"]
    kept = [
        r
        for r in records
        if r.get("kind") != "train"
        or (
            isinstance(r.get("step"), int)
            and (r["step"] % keep_every == 0 or r["step"] in (train[0]["step"], last))
        )
    ]
    import numpy as np

    steps = [r["step"] for r in train]
    contiguous = steps == list(range(steps[0], steps[0] + len(steps)))
    packed_steps = np.array(steps, dtype="<i4").tobytes()
    columns = {
        "kind": COLUMNS_KIND,
        "step": last,
        "steps": [steps[0], last] if contiguous else base64.b64encode(packed_steps).decode("ascii"),
        **{name: _pack([r.get(name) for r in train]) for name in COLUMNS},
    }
    return [*kept, columns]


def expand(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One training record per step again: a `train_columns` record becomes {"kind": "train",
    "step", "loss", "grad_norm"} for each step that has no whole record."""
    import numpy as np

    out = [r for r in records if r.get("kind") != COLUMNS_KIND]
    whole = {r["step"] for r in out if r.get("kind") == "train" and isinstance(r.get("step"), int)}
    for c in (r for r in records if r.get("kind") == COLUMNS_KIND):
        try:
            if isinstance(c["steps"], list):  # [first, last]: every step between
                steps = list(range(int(c["steps"][0]), int(c["steps"][1]) + 1))
            else:
                steps = np.frombuffer(base64.b64decode(c["steps"]), dtype="<i4").tolist()
            cols = {name: _unpack(c[name]) for name in COLUMNS if name in c}
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ValueError(
                f"a malformed {COLUMNS_KIND} record ({type(e).__name__}: {e})"
            ) from None
        if any(len(v) != len(steps) for v in cols.values()):
            raise ValueError(f"a {COLUMNS_KIND} record's columns and steps differ in length")
        for i, step in enumerate(steps):
            if step not in whole:
                out.append({"kind": "train", "step": step, **{k: v[i] for k, v in cols.items()}})
    out.sort(
        key=lambda r: (
            r.get("step") if isinstance(r.get("step"), int) else -1,
            r.get("kind") != "train",
        )
    )
    return out


def dumps(records: list[dict[str, Any]]) -> str:
    """JSON lines, keys sorted, non-finite values as null."""
    return "".join(
        json.dumps(json_safe(r), sort_keys=True, allow_nan=False) + "\n" for r in records
    )


class MetricsLog:
    """metrics.jsonl: one JSON object per line, appended and flushed as the run goes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(json_safe(record), sort_keys=True, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def records(self) -> list[dict[str, Any]]:
        if not (self.path.exists() or self.path.is_symlink()):
            return []
        out = files.read_jsonl(self.path)  # a line cut by a kill is skipped
        if any(isinstance(r, dict) and r.get("kind") == COLUMNS_KIND for r in out):
            return expand([r for r in out if isinstance(r, dict)])
        return out

    def truncate_after(self, step: int) -> None:
        """Keep only the records of steps <= `step` (before replaying the steps after it)."""
        keep = [r for r in self.records() if int(r.get("step", 0)) <= step]
        atomic_write(self.path, dumps(keep))

    def text(self) -> str:
        return files.read_text(self.path, "metrics") if self.path.exists() else ""

    def compact_text(self) -> str:
        """The log as a finished model directory keeps it (`compact`)."""
        return dumps(compact(self.records())) if self.path.exists() else ""
