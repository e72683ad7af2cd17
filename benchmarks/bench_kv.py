"""The cached evaluator's two memories, per token (`nox -s bench`): keys and values (`kv`, each
segment projects only its own tokens) against hidden states (`hidden`, every segment projects
the whole memory again), at mem 128 / 640 / 1,600 / 3,800 — on the shipped default model's
shape, 4 streams, tgt_len 64, same_length (every query sees exactly mem keys).

Beside each time: the model FLOP/s as a share of an fp32 matmul peak measured in the same run,
and the FLOP-bound speed-up — the ratio of the two paths' FLOPs per token, which is what the
speed-up would be if every FLOP cost the same. kv and hidden are timed in interleaved rounds
(best round counts: other processes only add time), in wall time and in this process's CPU time
(which a busy machine disturbs less). Measures and prints; never asserts.
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
ROWS = 4
SEGMENTS = 4  # timed segments per stream, after the memory is full
ROUNDS = 5


def _streams(model, mem: int, cache: str):
    """(run, tokens timed): a memory of `mem` positions filled, then SEGMENTS segments to time."""
    T = model.config.tgt_len
    rng = np.random.default_rng(mem)
    tokens = rng.integers(0, VOCAB, size=(ROWS, mem + 1 + SEGMENTS * T))
    docs = np.zeros_like(tokens)
    geometry = Geometry(tgt_len=T, mem_len=mem, clamp_len=None, same_length=True)
    warm = stream_nll(model, tokens[:, : mem + 1], docs[:, : mem + 1], geometry, cache=cache)
    rest = tokens[:, mem:], docs[:, mem:]  # one-token overlap

    def run() -> None:
        stream_nll(model, *rest, geometry, memory=warm.memory, cache=cache)

    return run, ROWS * SEGMENTS * T


def per_token_seconds(model, mem: int) -> tuple[dict[str, float], dict[str, float]]:
    """Best (wall, CPU) seconds per token of each memory at `mem`, interleaved round by round."""
    runs = {cache: _streams(model, mem, cache) for cache in ("kv", "hidden")}
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
        f"{cfg.d_model}, {cfg.n_head}×{cfg.d_head} heads, {ROWS} streams, tgt_len {cfg.tgt_len}, "
        f"same_length, float32, {threads} thread(s)"
    )
    cols = (
        "mem",
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
        t, cpu = per_token_seconds(model, mem)
        flops = {c: forward_flops_per_token(cfg, ROWS, cfg.tgt_len, mem, c) for c in t}
        table.add_row(
            f"{mem:,}",
            f"{1e6 * t['hidden']:.1f}",
            f"{1e6 * t['kv']:.1f}",
            f"{t['hidden'] / t['kv']:.2f}×",
            f"{cpu['hidden'] / cpu['kv']:.2f}×",
            f"{flops['hidden'] / flops['kv']:.2f}×",
            f"{100 * flops['hidden'] / t['hidden'] / peak:.1f} %",
            f"{100 * flops['kv'] / t['kv'] / peak:.1f} %",
        )
    console.print(table)
    console.print(
        f"fp32 matmul peak measured now: {peak / 1e9:.1f} GFLOP/s (torch {torch.__version__}); "
        f"best of {ROUNDS} interleaved rounds. The FLOP bound counts every matmul alike: the "
        "projections the kv memory removes run nearer the peak than the attention that stays, "
        "so the time saved is their share of the time, which can be less than their share of "
        "the FLOPs."
    )
