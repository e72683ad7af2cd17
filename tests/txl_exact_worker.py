"""Child process of tests/test_txl_exact.py: Transformer-XL's exact guarantees at the thread count
its parent sets (OMP_NUM_THREADS, applied with torch.set_num_threads so that more threads than
cores really run), with base and variant at different batch indices among unrelated rows.
Prints one line per failure and exits 1 on any."""

import os
import sys

import numpy as np
import torch

from probes.api.horizon import Horizon
from txl.config import TXLConfig
from txl.evaluator import recompute_nll, stream_nll
from txl.geometry import Geometry
from txl.model import TransformerXL

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
V = 23
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)


rng = np.random.default_rng(0)
for pos_enc in ("rel", "shaw", "abs", "learned"):
    torch.manual_seed(1)
    config = TXLConfig(
        vocab_size=V, n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64, tgt_len=5,
        mem_len=7, pos_enc=pos_enc, max_pos=64, init_std=0.4,
    )  # fmt: skip
    model = TransformerXL(config).eval()
    N = 40
    tokens = rng.integers(0, V, (1, N))
    docs = np.zeros_like(tokens)
    noise = rng.integers(0, V, (3, N))
    for cache in ("kv", "hidden") if pos_enc in ("rel", "shaw") else ("hidden",):
        name = f"{pos_enc}/{cache}"
        for mem, tgt in ((0, 5), (7, 5), (4, 3)):
            g = Geometry(tgt, mem, clamp_len=None, reset=False)
            batch = np.r_[tokens, noise[:2], tokens]
            x = stream_nll(model, batch, np.repeat(docs, 4, 0), g, cache=cache).nll
            expect(np.array_equal(x[0], x[3], equal_nan=True), f"{name} {mem}/{tgt} identical")
            where = 2
            changed = tokens.copy()
            changed[0, where] = (changed[0, where] + 1) % V
            batch = np.r_[tokens, noise[:1], changed]
            x = stream_nll(model, batch, np.repeat(docs, 3, 0), g, cache=cache).nll
            h = Horizon.of(g, n_layer=2)
            far = [t for t in range(where + 1, N) if t - where > h.token(t)[1]]
            expect(np.array_equal(x[0, far], x[2, far]), f"{name} {mem}/{tgt} beyond reach")
        # under reset, B does not depend on A's content
        b = 17
        two = np.r_[np.zeros(b, np.int64), np.ones(N - b, np.int64)][None]
        other = tokens.copy()
        other[0, :b] = rng.integers(0, V, b)
        g = Geometry(5, 7, clamp_len=None, reset=True)
        x = stream_nll(model, np.r_[tokens, noise[:1], other], np.repeat(two, 3, 0), g, cache=cache)
        expect(np.array_equal(x.nll[0, b + 1 :], x.nll[2, b + 1 :]), f"{name} reset")
    # the recompute evaluator: identical windows at different indices
    batch = np.r_[tokens, noise[:2], tokens]
    x = recompute_nll(model, batch, np.repeat(docs, 4, 0), 12, reset=False).nll
    expect(np.array_equal(x[0], x[3], equal_nan=True), f"{pos_enc} recompute identical")
for f in failures:
    print("FAILED", f)
print(f"threads {torch.get_num_threads()}: {len(failures)} failures")
sys.exit(1 if failures else 0)
