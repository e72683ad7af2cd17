"""Training-stream throughput: tokens per second on one core (never asserted)."""

from __future__ import annotations

import time

from rich.table import Table

from synth.language import Language
from synth.stream import StreamConfig, TrainStream

SETUPS = [
    ("default mixture", StreamConfig(), 32, 64),
    ("corpus only", StreamConfig(p_corpus=1, p_bursty=0, p_sparse=0), 32, 64),
    ("bursty only", StreamConfig(p_corpus=0, p_bursty=1, p_sparse=0), 32, 64),
    ("sparse only", StreamConfig(p_corpus=0, p_bursty=0, p_sparse=1), 32, 64),
    ("default, batch 16 × tgt 128", StreamConfig(), 16, 128),
]


def measure(
    config: StreamConfig, batch: int, tgt: int, seconds: float = 2.0
) -> tuple[float, float]:
    """(tokens/s in steady state, seconds to the first batch)."""
    lang = Language.default()
    t0 = time.perf_counter()
    stream = TrainStream(lang, config, batch_size=batch, tgt_len=tgt, seed=0)
    stream.next_batch()
    first = time.perf_counter() - t0
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        stream.next_batch()
        n += 1
    return n * stream.tokens_per_batch / (time.perf_counter() - t0), first


def run(console) -> None:
    Language.default()  # built once, outside the timings
    table = Table(title="synth.TrainStream (one process, numpy; target >= 1M tokens/s)")
    for col in ("setup", "batch × tgt_len", "tokens/s", "first batch (s)"):
        table.add_column(col, justify="right" if col != "setup" else "left")
    for name, cfg, b, t in SETUPS:
        rate, first = measure(cfg, b, t)
        table.add_row(name, f"{b} × {t}", f"{rate / 1e6:.2f} M", f"{first:.2f}")
    console.print(table)
