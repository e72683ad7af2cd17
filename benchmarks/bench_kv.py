"""The cached evaluator's two memories, per token (`nox -s bench`): keys and values (`kv`, each
segment projects only its own tokens) against hidden states (`hidden`, every segment projects
the whole memory again), at mem 128 / 640 / 1,600 / 3,800 — on the shipped default model's
shape, tgt_len 64, same_length (every query sees exactly mem keys), every target read.

Each memory length at two batch sizes: 4 streams, and the rows one forward of a probe run
carries at that geometry (the adapter's `max_rows` under the KV memory's budget: what `probe
run` batches). A small batch is dominated by the per-segment work both paths share (the segment's
attention, feed-forward and logits, and the cost of each call), so the memory's share of the
time, and with it the speed-up, grows with the batch.

Beside each time: the model FLOP/s as a share of an fp32 matmul peak measured in the same run,
and the FLOP-bound speed-up — the ratio of the two paths' FLOPs per token, which is what the
speed-up would be if every FLOP cost the same (copies and concatenations, which the hidden path
has more of, are not FLOPs). kv and hidden are timed in interleaved rounds (best round counts:
other processes only add time), in wall time and in this process's CPU time (which a busy
machine disturbs less). Measures and prints; never asserts.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    VOCAB,
    _config,
    _model,
    _threads,
    forward_flops_per_token,
    matmul_peak_flops,
)
from txl.evaluator import stream_nll
from txl.geometry import Geometry

MEMS = (128, 640, 1600, 3800)
ROWS = 4  # the small batch; the other is the adapter's own (`run_rows`)
SEGMENTS = 8  # timed segments per stream, after the memory is full
ROUNDS = 7


def _geometry(model, mem: int) -> Geometry:
    return Geometry(tgt_len=model.config.tgt_len, mem_len=mem, clamp_len=None, same_length=True)


def run_rows(model, mem: int) -> int:
    """Rows per forward of a probe run on this model at `mem` (the KV memory's budget)."""
    from probes.adapters.txl import wrap

    return wrap(model, cache="kv").max_rows(_geometry(model, mem))


def _streams(model, mem: int, cache: str, rows: int):
    """(run, tokens timed): a memory of `mem` positions filled, then SEGMENTS segments to time."""
    T = model.config.tgt_len
    rng = np.random.default_rng(mem)
    tokens = rng.integers(0, VOCAB, size=(rows, mem + 1 + SEGMENTS * T))
    docs = np.zeros_like(tokens)
    geometry = _geometry(model, mem)
    warm = stream_nll(model, tokens[:, : mem + 1], docs[:, : mem + 1], geometry, cache=cache)
    rest = tokens[:, mem:], docs[:, mem:]  # one-token overlap

    def run() -> None:
        stream_nll(model, *rest, geometry, memory=warm.memory, cache=cache)

    return run, rows * SEGMENTS * T


def per_token_seconds(
    model, mem: int, rows: int = ROWS
) -> tuple[dict[str, float], dict[str, float]]:
    """Best (wall, CPU) seconds per token of each memory at `mem` and `rows` streams,
    interleaved round by round."""
    runs = {cache: _streams(model, mem, cache, rows) for cache in ("kv", "hidden")}
    for run, _ in runs.values():
        run()  # warm up
    wall = {cache: math.inf for cache in runs}
    cpu = {cache: math.inf for cache in runs}
    for _ in range(ROUNDS):
        for cache, (run, n) in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            wall[cache] = min(wall[cache], (time.perf_counter() - t0) / n)
            cpu[cache] = min(cpu[cache], (time.process_time() - c0) / n)
    return wall, cpu


def run(console: Console) -> None:
    threads = _threads()
    cfg = _config()
    model = _model(cfg).eval()
    peak = matmul_peak_flops()
    table = Table(
        title=f"Cached evaluation per token, kv vs hidden memory — {cfg.n_layer} layers, d_model "
        f"{cfg.d_model}, {cfg.n_head}×{cfg.d_head} heads, tgt_len {cfg.tgt_len}, "
        f"same_length, float32, {threads} thread(s)"
    )
    cols = (
        "mem",
        "rows",
        "hidden µs/token",
        "kv µs/token",
        "speed-up",
        "CPU-time speed-up",
        "FLOP bound",
        "hidden % peak",
        "kv % peak",
    )
    for col in cols:
        table.add_column(col, justify="right")
    for mem in MEMS:
        for rows in (ROWS, run_rows(model, mem)):
            _add_row(table, model, mem, rows, peak)
    console.print(table)
    console.print(
        f"rows: {ROWS} streams, then the rows one forward of a probe run carries at that memory "
        f"length. fp32 matmul peak measured now: {peak / 1e9:.1f} GFLOP/s (torch "
        f"{torch.__version__}); best of {ROUNDS} interleaved rounds. The FLOP bound counts every "
        "matmul alike: the projections the kv memory removes run nearer the peak than the "
        "attention that stays, so the time saved is their share of the time, which can be less "
        "than their share of the FLOPs; past it, the hidden path's copies of the memory (not "
        "FLOPs) add to its time."
    )


def _add_row(table, model, mem: int, rows: int, peak: float) -> None:
    cfg = model.config
    t, cpu = per_token_seconds(model, mem, rows)
    flops = {c: forward_flops_per_token(cfg, rows, cfg.tgt_len, mem, c) for c in t}
    table.add_row(
        f"{mem:,}",
        f"{rows}",
        f"{1e6 * t['hidden']:.1f}",
        f"{1e6 * t['kv']:.1f}",
        f"{t['hidden'] / t['kv']:.2f}×",
        f"{cpu['hidden'] / cpu['kv']:.2f}×",
        f"{flops['hidden'] / flops['kv']:.2f}×",
        f"{100 * flops['hidden'] / t['hidden'] / peak:.1f} %",
        f"{100 * flops['kv'] / t['kv'] / peak:.1f} %",
    )
