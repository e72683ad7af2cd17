"""What a training run shows on stderr: a progress bar (step, loss, tokens/s, MFU, ETA) and a line
per evaluation. txl keeps its own (rich, no probes import): it trains for any caller."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def eval_line(record: Mapping[str, Any]) -> str:
    """One line of an evaluation's scalar fields (tables and lists left out)."""
    parts = []
    for k, v in record.items():
        if k in ("kind", "step") or isinstance(v, Mapping | list):
            continue
        parts.append(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}")
    return f"eval @ step {record['step']}: " + ", ".join(parts)


class TrainProgress:
    """A rich progress bar on stderr (a no-op when disabled: `print` then goes to `log`)."""

    def __init__(self, enabled: bool, total: int, done: int, log: Callable[[str], None]) -> None:
        self.enabled, self.log = enabled, log
        self.tps: float | None = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[tps]} tok/s"),
            TextColumn("mfu {task.fields[mfu]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.task = self.bar.add_task(
            "train", total=total, completed=done, loss="-", tps="-", mfu="-"
        )

    def __enter__(self) -> TrainProgress:
        if self.enabled:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)

    def update(self, record: Mapping[str, Any]) -> None:
        """Show a training step's record (tokens/s smoothed over recent steps)."""
        if not self.enabled:
            return
        tps = record["tokens_per_s"]
        if tps:
            self.tps = tps if self.tps is None else 0.9 * self.tps + 0.1 * tps
        mfu = record["mfu"]
        self.bar.update(
            self.task,
            completed=record["step"],
            loss=f"{record['loss']:.4f}",
            tps=f"{self.tps:,.0f}" if self.tps else "-",
            mfu=f"{mfu:.1%}" if mfu is not None else "-",
        )

    def print(self, text: str) -> None:
        if self.enabled:
            self.bar.console.print(text, highlight=False)
        else:
            self.log(text)
