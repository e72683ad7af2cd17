"""Real models: one long row under `--evaluator full`, the masked eager forward against blocked
attention (`probes.adapters.hf_blocked`).

Per model and length (random token ids, one document, the last 4 tokens scored): seconds of
`score` with the explicit (L, K) masks and eager attention, then with blocked attention, the
largest |NLL difference| between the two, and the process's peak RSS during each (reset before
each forward where Linux allows it, else the peak so far: the blocked forwards run first,
shortest first). Eager runs only up to
BENCH_REAL_EAGER_MAX tokens (8,192: Gemma 3 needs 4 GiB of scores a layer at 16 K).
BENCH_REAL_LONG_TOKENS (4096,8192,16384,32000) picks the lengths, each cut to the model's
positions; BENCH_REAL_MODELS the models. Runs where `bench_real` runs. Printed, never asserted.
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np

from benchmarks.bench_real import chosen_models


def _reset_peak() -> None:
    """Reset the process's peak RSS where Linux allows it (clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_gb() -> float:
    """Peak RSS since the last reset (Linux VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _timed(lm, tokens, blocked_from: int):
    from probes.adapters import hf
    from txl.geometry import Geometry

    n = tokens.shape[1]
    docs = np.zeros((1, n), np.int64)
    scored = np.zeros((1, n), bool)
    scored[0, -4:] = True
    kept, hf.BLOCKED_KEYS = hf.BLOCKED_KEYS, blocked_from
    _reset_peak()
    try:
        t0 = time.perf_counter()
        nll = lm.score(tokens, docs, scored, Geometry(tgt_len=64, mem_len=0, clamp_len=None)).nll
        return time.perf_counter() - t0, nll[0, -4:]
    finally:
        hf.BLOCKED_KEYS = kept


def run(console) -> None:
    files = chosen_models(console, "real_long")
    if not files:
        return
    import torch
    from rich.table import Table

    from probes.adapters import hf_load

    lengths = [
        int(x) for x in os.environ.get("BENCH_REAL_LONG_TOKENS", "4096,8192,16384,32000").split(",")
    ]
    eager_max = int(os.environ.get("BENCH_REAL_EAGER_MAX", 8192))
    table = Table(title=f"one row under full, {torch.get_num_threads()} threads, float32")
    for col in ("model", "tokens", "blocked s", "peak GB", "eager s", "peak GB", "× faster",
                "max |ΔNLL|"):  # fmt: skip
        table.add_column(col, justify="right")
    for name, file in files.items():
        lm = hf_load.load(file, evaluator="full")
        top = lm.max_positions or max(lengths)
        rng = np.random.default_rng(0)
        rows = []
        for n in sorted({min(n, top) for n in lengths}):
            tokens = rng.integers(0, int(lm.config.vocab_size), (1, n))
            s_blocked, nll_blocked = _timed(lm, tokens, blocked_from=1)
            rows.append([n, s_blocked, _peak_gb(), tokens, nll_blocked])
        for row in rows:
            n, s_blocked, peak_blocked, tokens, nll_blocked = row
            cells = [name, f"{n:,}", f"{s_blocked:.1f}", f"{peak_blocked:.2f}"]
            if n <= eager_max:
                s_eager, nll_eager = _timed(lm, tokens, blocked_from=2**62)
                diff = float(np.abs(nll_eager - nll_blocked).max())
                cells += [f"{s_eager:.1f}", f"{_peak_gb():.2f}", f"{s_eager / s_blocked:.1f}",
                          f"{diff:.1e}"]  # fmt: skip
            else:
                cells += ["—"] * 4
            table.add_row(*cells)
        del lm
    console.print(table)
