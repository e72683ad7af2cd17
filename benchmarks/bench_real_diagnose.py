"""`probe diagnose --haystack default` on a real model: the least time its forwards can take.

The suite runs in process on the loaded weights (default geometry, default sample sizes), every
scoring call answered by a stand-in that counts what a forward must process and returns a
constant loss: texts, plans, statistics and writing run as in a real diagnose, the forwards are
counted instead of run. Counted per probe: `score` and `score_shared` — each distinct row once,
up to its last scored position (one forward per distinct text, nothing shared: the floor of
`bench_real`); `score_window` — one window per scored token.

Then what those tokens cost on this machine, at the threads set:
- **the measured floor**: one row a forward of 256, 512, 1,024 and 2,048 tokens (logits
  nowhere), its best tokens/s — the suite's tokens at that rate;
- **the compute bound**: 2 × non-embedding parameters per token (attention left out), over the
  fp32 matrix-product peak measured in the same run — no implementation on this machine can
  forward the suite faster.

Against the target of `probe diagnose --model <SmolLM2 file> --haystack default` in 10 minutes
on the 2-core machine (measured with OMP_NUM_THREADS=2). Printed, never asserted. Runs where
`bench_real` runs; BENCH_REAL_MODELS picks the models (smollm2,gemma3).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections import defaultdict

import numpy as np

from benchmarks.bench_real import chosen_models, forward_flops, matmul_peak, patched

FLOOR_LENGTHS = (256, 512, 1024, 2048)
TARGET_MINUTES = 10


class Counter:
    """Stands in for a model's scoring methods: counts tokens, returns a constant loss."""

    def __init__(self) -> None:
        self.probe = "?"
        self.tokens: dict[str, int] = defaultdict(int)
        self.rows: dict[str, int] = defaultdict(int)

    @staticmethod
    def _scores(positions):
        from probes.api.model import TokenScores

        nll = np.where(positions, 1.0, np.nan)
        return TokenScores(nll, np.zeros(positions.shape, dtype=bool))

    def score(self, tokens, doc_ids, positions, geometry, **_):
        distinct: dict[bytes, int] = {}
        for r in range(tokens.shape[0]):
            if positions[r].any():
                last = int(np.flatnonzero(positions[r]).max())
                distinct[tokens[r, :last].tobytes()] = last
        self.tokens[self.probe] += sum(distinct.values())
        self.rows[self.probe] += len(distinct)
        return self._scores(positions)

    def score_window(self, tokens, doc_ids, positions, window, geometry):
        t = np.nonzero(positions)[1]
        self.tokens[self.probe] += int(np.minimum(t, int(window)).sum())
        self.rows[self.probe] += len(t)
        return self._scores(positions)


def counted_suite(lm) -> Counter:
    """Run `probe diagnose --haystack default` on `lm` with its forwards counted."""
    from probes.framework import runner
    from probes.suite.one import diagnose

    counter = Counter()
    execute = runner.execute

    def named(plan, **kw):
        counter.probe = plan.cls.name
        return execute(plan, **kw)

    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as out:
        for attr in ("score", "score_shared", "score_window"):
            if hasattr(lm, attr):
                fake = counter.score_window if attr == "score_window" else counter.score
                stack.enter_context(patched(lm, attr, fake))
        stack.enter_context(patched(runner, "execute", named))
        diagnose(model=lm, haystack="default", out=out, progress=False)
    return counter


def floor_rate(lm) -> dict[int, float]:
    """Tokens/s of one row a forward (the decoder only, no logits), best of 3, by length."""
    import torch

    decoder, vocab = lm.model.get_decoder(), int(lm.info.vocab_size)
    rng = np.random.default_rng(0)
    rates = {}
    with torch.inference_mode():
        for n in FLOOR_LENGTHS:
            ids = torch.from_numpy(rng.integers(0, vocab, (1, n))).to(lm.device)
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                decoder(input_ids=ids)
                best = min(best, time.perf_counter() - t0)
            rates[n] = n / best
    return rates


def run(console) -> None:
    files = chosen_models(console, "real_diagnose")
    if not files:
        return
    import torch
    from rich.table import Table

    from probes.adapters import hf_load
    from probes.framework.provenance import cpu_count

    threads = torch.get_num_threads()
    peak = matmul_peak("cpu")
    console.print(
        f"{cpu_count()} cores, {threads} threads, float32; fp32 2048² matmul peak {peak:,.0f} "
        "GFLOP/s"
    )
    for name, file in files.items():
        lm = hf_load.load(file, evaluator="stream")
        t0 = time.perf_counter()
        counted = counted_suite(lm)
        other = time.perf_counter() - t0
        rates = floor_rate(lm)
        best = max(rates.values())
        table = Table(title=f"{name}: probe diagnose --haystack default, its forwards counted")
        for h in ("probe", "rows", "tokens", "at the floor min", "compute bound min"):
            table.add_column(h, justify="left" if h == "probe" else "right")
        total = 0
        for probe, tokens in counted.tokens.items():
            total += tokens
            table.add_row(
                probe, f"{counted.rows[probe]:,}", f"{tokens:,}", f"{tokens / best / 60:.1f}",
                f"{forward_flops(lm, tokens) / (peak * 1e9) / 60:.1f}",
            )  # fmt: skip
        table.add_row(
            "suite", f"{sum(counted.rows.values()):,}", f"{total:,}", f"{total / best / 60:.1f}",
            f"{forward_flops(lm, total) / (peak * 1e9) / 60:.1f}",
        )  # fmt: skip
        console.print(table)
        console.print(
            f"{name}: floor tokens/s by row length "
            + ", ".join(f"{n:,}: {r:,.0f}" for n, r in rates.items())
            + f"; everything but the forwards (texts, plans, statistics, writing) {other:.0f} s;"
            f" target {TARGET_MINUTES} min"
        )
        del lm
