"""Speed and memory of the core, measured on this machine in one run (`nox -s bench`).

1. Training throughput (tokens/s) of our TransformerXL against HF's TransfoXLLMHeadModel
   (transformers 4.35.2, the reference port) — same shape, same batch, same optimizer, memory
   carried across steps — interleaved round by round so that a noisy neighbour slows both alike.
   The model's FLOP/s is given as a share of an fp32 matmul peak measured in the same run.
2. Per-token evaluation time of the cached evaluator (its KV memory; mem_len = L with
   same_length: every query sees exactly L keys) against the sliding-window recompute evaluator
   (a fresh window of L tokens per scored token, the paper's vanilla baseline) — the curve of the
   paper's Table 9. Recompute is timed on a sample of positions (it costs a whole window per
   token). kv against the hidden-state memory is benchmarks/bench_kv.py.
3. Peak memory of cached evaluation (KV memory) at mem 640 and 3,800, and bytes per cached token
   (the slope of peak memory against mem_len), each point in a fresh process (peak RSS, Linux).

Measures and prints; never asserts (timing belongs in benchmarks, not tests). The HF row is skipped
when transformers (or its TransfoXL) is missing. Takes about a minute or two on 2 cores.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from txl.config import TXLConfig
from txl.evaluator import recompute_nll, stream_nll
from txl.geometry import Geometry
from txl.hf_reference import transfo_xl_kwargs
from txl.model import TransformerXL

# The shipped "tiny" preset's shape (probes/training/presets.py), a vocabulary the size of a small synthetic one.
VOCAB = 512
SHAPE = dict(n_layer=2, d_model=128, n_head=4, d_head=32, d_inner=512, tgt_len=64, mem_len=256)
TRAIN_BATCH = 16
EVAL_ROWS = 4  # parallel streams of the cached evaluator
EVAL_LENGTHS = (128, 256, 640, 1600)
RECOMPUTE_POSITIONS = {128: 32, 256: 16, 640: 8, 1600: 4}  # positions timed per L
MEMORY_LENGTHS = (0, 640, 1600, 3800)
ROUNDS = 7  # interleaved timing rounds (training); the best round counts


def _threads() -> int:
    """All the cores this process may use, or TXL_BENCH_THREADS. On cores shared with other busy
    processes, fewer threads can be much faster: OpenMP's barriers wait for descheduled threads."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    n = int(os.environ.get("TXL_BENCH_THREADS", n))
    torch.set_num_threads(n)
    return n


def _config(**overrides) -> TXLConfig:
    return TXLConfig(vocab_size=VOCAB, **{**SHAPE, **overrides})


def _model(config: TXLConfig) -> TransformerXL:
    torch.manual_seed(0)
    return TransformerXL(config)


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


def matmul_peak_flops(n: int = 1536, repeats: int = 5) -> float:
    """Best fp32 FLOP/s of an n×n @ n×n matmul on this machine, now."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm up
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def forward_flops_per_token(
    cfg: TXLConfig, batch: int, tgt_len: int, mem_len: int, cache: str = "hidden"
) -> float:
    """Multiply-adds ×2 that one forward executes per token of a segment with a full memory,
    every matmul of the model as written: the full T × (M+T) score grid; with the hidden-state
    memory (training, `--cache hidden`) the memory's keys and values are projected again every
    segment and W_R r once per segment and layer; with the KV memory (`kv`) only the segment's
    own keys and values are projected and W_R r once per evaluation (shared by every segment:
    not counted)."""
    d, hd, T, K = cfg.d_model, cfg.n_head * cfg.d_head, tgt_len, mem_len + tgt_len
    projected = T if cache == "kv" else K  # positions whose k and v a segment projects
    per_layer = (
        2 * d * hd  # q
        + 2 * 2 * d * hd * projected / T  # k, v
        + (0 if cache == "kv" else 2 * d * hd * K / (T * batch))  # W_R r, once per segment
        + 2 * hd * K * 2  # content and position scores
        + 2 * hd * K  # probabilities @ values
        + 2 * hd * d  # output projection
        + 2 * 2 * d * cfg.d_inner  # feed-forward
    )
    return cfg.n_layer * per_layer + 2 * d * cfg.vocab_size


# ---------------------------------------------------------------------------------------------
# Training throughput
# ---------------------------------------------------------------------------------------------


def _hf_model(cfg: TXLConfig):
    """HF's TransfoXLLMHeadModel of the same shape (plain softmax output), or None if unavailable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from transformers import TransfoXLConfig, TransfoXLLMHeadModel

            hf_cfg = TransfoXLConfig(**transfo_xl_kwargs(cfg))
            torch.manual_seed(0)
            return TransfoXLLMHeadModel(hf_cfg)
    except Exception:  # not installed, or a version without TransfoXL
        return None


def _train_step_fn(model, kind: str, cfg: TXLConfig, batch: int) -> Callable[[], None]:
    """One optimizer step on a fresh random segment, the memory carried from the last step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    T = cfg.tgt_len
    state: dict = {"mem": None}
    if kind == "hf":
        state["mem"] = [torch.empty(0, batch, cfg.d_model) for _ in range(cfg.n_layer)]
    model.train()

    def step() -> None:
        seq = torch.randint(0, cfg.vocab_size, (batch, T + 1), generator=g)
        inp, tgt = seq[:, :-1], seq[:, 1:]
        if kind == "ours":
            out = model(inp, memory=state["mem"], targets=tgt)
            loss = out.nll.mean()
            state["mem"] = out.memory
        else:  # HF: log-probs over the vocabulary, loss of every target (as ours)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = model(input_ids=inp, mems=state["mem"])
            loss = -out.prediction_scores.gather(-1, tgt[..., None]).mean()
            state["mem"] = out.mems
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def bench_training(console: Console, peak: float) -> None:
    cfg = _config()
    B, T = TRAIN_BATCH, cfg.tgt_len
    steps = {"ours": _train_step_fn(_model(cfg), "ours", cfg, B)}
    hf = _hf_model(cfg)
    if hf is not None:
        steps["HF TransfoXL 4.35.2"] = _train_step_fn(hf, "hf", cfg, B)
    for fn in steps.values():  # warm up (allocator, first memory fill)
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(ROUNDS):  # interleaved rounds
        for name, fn in steps.items():
            t0 = time.perf_counter()
            for _ in range(2):
                fn()
            times[name].append((time.perf_counter() - t0) / 2)

    flops_tok = 3 * forward_flops_per_token(cfg, B, T, cfg.mem_len)  # fwd + bwd ≈ 3 × fwd
    table = Table(
        title=f"Training throughput — {cfg.n_layer} layers, d_model {cfg.d_model}, "
        f"{cfg.n_head}×{cfg.d_head} heads, d_inner {cfg.d_inner}, vocab {VOCAB}; batch {B}, "
        f"tgt_len {T}, mem_len {cfg.mem_len}, AdamW, float32"
    )
    for col in ("model", "ms / step", "tokens / s", "vs HF", "GFLOP/s", "% of matmul peak"):
        table.add_column(col, justify="right" if col != "model" else "left")
    best = {k: min(v) for k, v in times.items()}  # noise from other processes only adds time
    tps = {k: B * T / best[k] for k in times}
    ref = tps.get("HF TransfoXL 4.35.2")
    for name in times:
        flops = flops_tok * tps[name]
        table.add_row(
            name,
            f"{1e3 * best[name]:.1f}",
            f"{tps[name]:,.0f}",
            f"{tps[name] / ref:.2f}×" if ref else "—",
            f"{flops / 1e9:.1f}",
            f"{100 * flops / peak:.1f} %",
        )
    if ref is None:
        table.add_row("HF TransfoXL", "skipped: transformers==4.35.2 not installed", "", "", "", "")
    console.print(table)
    console.print(
        f"model FLOPs per training token ≈ 3 × forward = {flops_tok / 1e6:.2f} MFLOP; "
        f"fp32 matmul peak measured now: {peak / 1e9:.1f} GFLOP/s; best of {ROUNDS} interleaved rounds of 2 steps"
    )


# ---------------------------------------------------------------------------------------------
# Evaluation: cached vs recompute
# ---------------------------------------------------------------------------------------------


def _cached_seconds_per_token(model: TransformerXL, L: int, rows: int, n_seg: int) -> float:
    T = model.config.tgt_len
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=(rows, L + 1 + n_seg * T))
    docs = np.zeros_like(tokens)
    geometry = Geometry(tgt_len=T, mem_len=L, clamp_len=None, same_length=True)
    warm = stream_nll(model, tokens[:, : L + 1], docs[:, : L + 1], geometry)  # fill the memory
    rest = tokens[:, L:], docs[:, L:]  # one-token overlap
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        stream_nll(model, *rest, geometry, memory=warm.memory)
        best = min(best, time.perf_counter() - t0)
    return best / (rows * n_seg * T)


def _recompute_seconds_per_token(model: TransformerXL, L: int, n_pos: int) -> float:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=(1, L + n_pos + 1))
    docs = np.zeros_like(tokens)
    positions = np.zeros(tokens.shape, dtype=bool)
    positions[0, L + 1 :] = True  # full windows only
    warm = positions.copy()
    warm[0, L + 2 :] = False
    recompute_nll(model, tokens, docs, L, positions=warm)
    t0 = time.perf_counter()
    recompute_nll(model, tokens, docs, L, positions=positions)
    return (time.perf_counter() - t0) / n_pos


def bench_evaluation(console: Console) -> None:
    model = _model(_config()).eval()
    table = Table(
        title=f"Evaluation time per token, attention length L (cached: KV memory, mem_len L, "
        f"same_length, tgt_len {model.config.tgt_len}, {EVAL_ROWS} streams; recompute: window "
        "L, its default batching)"
    )
    for col in ("L", "cached ms/token", "recompute ms/token", "recompute / cached", "positions"):
        table.add_column(col, justify="right")
    for L in EVAL_LENGTHS:
        cached = _cached_seconds_per_token(model, L, EVAL_ROWS, n_seg=4)
        recompute = _recompute_seconds_per_token(model, L, RECOMPUTE_POSITIONS[L])
        table.add_row(
            str(L),
            f"{1e3 * cached:.3f}",
            f"{1e3 * recompute:.2f}",
            f"{recompute / cached:,.0f}×",
            str(RECOMPUTE_POSITIONS[L]),
        )
    console.print(table)
    console.print(
        "the paper's Table 9 (one GPU): 363× at L=800, 773× at 1,800, 1,409× at 2,800, "
        "1,874× at 3,800"
    )


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def _proc_status(key: str) -> int:
    """A /proc/self/status field in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _memory_probe(mem_len: int) -> None:
    """Run in a fresh process: peak RSS above the loaded, warmed-up model while the cached evaluator
    streams with a memory of mem_len (one row). Prints one JSON line."""
    torch.set_num_threads(1)
    model = _model(_config()).eval()
    T = model.config.tgt_len
    rng = np.random.default_rng(0)
    warm = rng.integers(0, VOCAB, size=(1, 2 * T + 1))
    stream_nll(model, warm, np.zeros_like(warm), Geometry(T, T))
    gc.collect()
    base = _proc_status("VmRSS")
    try:  # reset the high-water mark (Linux ≥ 4.0); else the peak so far counts from the start
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    tokens = rng.integers(0, VOCAB, size=(1, mem_len + 4 * T + 1))
    geometry = Geometry(T, mem_len, None, same_length=mem_len > 0)
    result = stream_nll(model, tokens, np.zeros_like(tokens), geometry, cache="kv")
    print(json.dumps({"peak": _proc_status("VmHWM") - base, "cache": result.memory.nbytes()}))


def bench_memory(console: Console) -> None:
    if not Path("/proc/self/status").exists():
        console.print("memory: skipped (needs Linux /proc for peak RSS)")
        return
    root = Path(__file__).resolve().parents[1]
    points = {}
    for M in MEMORY_LENGTHS:
        code = f"from benchmarks.bench_core import _memory_probe; _memory_probe({M})"
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
        )
        points[M] = json.loads(out.stdout.strip().splitlines()[-1])
    xs = np.array(MEMORY_LENGTHS, dtype=float)
    slope_peak = np.polyfit(xs, [points[M]["peak"] for M in MEMORY_LENGTHS], 1)[0]
    slope_cache = np.polyfit(xs, [points[M]["cache"] for M in MEMORY_LENGTHS], 1)[0]
    cfg = _config()
    table = Table(
        title=f"Cached evaluation memory (KV memory, one stream, tgt_len {cfg.tgt_len}, "
        "same_length, float32; peak RSS above the loaded model, fresh process per row)"
    )
    for col in ("mem_len", "peak MiB", "cache MiB"):
        table.add_column(col, justify="right")
    for M in MEMORY_LENGTHS:
        table.add_row(
            str(M), f"{points[M]['peak'] / 2**20:.1f}", f"{points[M]['cache'] / 2**20:.2f}"
        )
    table.add_row(
        "slope", f"{slope_peak:,.0f} B/token", f"{slope_cache:,.0f} B/token", style="bold"
    )
    console.print(table)
    per_token = 2 * cfg.n_layer * cfg.n_head * cfg.d_head * 4 + 8
    console.print(
        f"the cache itself: 2 (keys, values) × n_layer × n_head × d_head × 4 B + 8 B doc id = "
        f"{per_token:,} B per cached token (the hidden-state memory: n_layer × d_model × 4 B + "
        f"8 B = {cfg.n_layer * cfg.d_model * 4 + 8:,} B); the peak's slope adds the per-segment "
        "scores over \\[mem; segment] (∝ n_head × tgt_len per cached token)"
    )


# ---------------------------------------------------------------------------------------------


def run(console: Console) -> None:
    threads = _threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    console.print(
        f"torch {torch.__version__}, {threads} thread(s) (TXL_BENCH_THREADS to change); "
        f"{os.cpu_count()} CPUs visible; load average {load:.1f} before the run"
    )
    if load > 0.5:
        console.print(
            "[yellow]other processes are using the CPUs: absolute figures are noisy; the ratios "
            "(ours vs HF, interleaved; recompute vs cached) hold up better[/yellow]"
        )
    t0 = time.perf_counter()
    peak = matmul_peak_flops()
    bench_training(console, peak)
    bench_evaluation(console)
    bench_memory(console)
    console.print(f"bench_core took {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    run(Console())
