"""speed: per-token evaluation time, cached (Transformer-XL) vs recompute (vanilla), by attention
length — the paper's Table 9.

For each attention length L = mem_len + tgt_len (tgt_len the eval one; by default mem_len ∈
{mem/8, mem/4, mem/2, mem} of the eval --mem):

    cached      the streaming evaluator with memory mem_len: one row of `warm + --tokens` tokens
                (warm = mem_len rounded up to whole segments, so the memory fills) is scored
                segment by segment; time / tokens streamed
    recompute   every one of the last `--tokens` tokens predicted from a fresh window of L tokens
                (the LossModel's `score_window`, many windows per forward); time / --tokens
    ratio       recompute / cached: how many times slower evaluation is without the cache

Each time is the median of `--repeats` timed calls after one untimed warm-up call (allocations,
kernel selection); `ratio_range` is the smallest and largest per-repeat ratio. Wall-clock time of
the whole LossModel call (scores come back as numpy arrays, so GPU work is finished). For
reference, the paper reports (one GPU, its base model) 1,874× at L = 3,800, 1,409× at 2,800,
773× at 1,800 and 363× at 800; the ratio grows roughly linearly with L. Timings are measurements,
not checks: nothing here fails a run.

Metrics: `lengths`, per length (bins) `attn_len`, `mem_len`, `cached_ms_per_token`,
`recompute_ms_per_token`, `ratio`, `ratio_range`; `ratio_at_max` (the ratio at the largest L).
Plot: `speed.png`, ms per token vs L for both (log scale). `n` is unused (the text is filler,
`Texts.local_text`; its content does not change the time). Through the tokenizer bridge (a
model with its own tokenizer) the filler is rendered in the model's tokens and cut to the same
length, so times are per model token.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from probes.api.declarations import Column
from probes.api.model import score_rows, score_truncated
from probes.api.params import increasing_ints, ints_text, param
from probes.api.probe_base import Outcome, Probe, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.engine.sweep import require_window
from probes.report import plots
from probes.report.plots import line_plot

LENGTHS_HELP = (
    "memory lengths: 'auto' (mem/8, mem/4, mem/2 and mem of the eval --mem) or a comma list "
    "of mem_len values, e.g. 64,256,640 (attention length = mem_len + tgt_len)"
)


def parse_mems(text: str, mem: int | None = None) -> list[int]:
    def auto() -> list[int]:
        if mem is None:
            return []
        return sorted({max(1, mem // 8), max(1, mem // 4), max(1, mem // 2), max(1, mem)})

    return increasing_ints(text, "memory lengths", "64,256", auto)


def check_mems(text: str) -> None:
    parse_mems(text)


@probe("speed", version=1)
class Speed(Probe):
    """Per-token evaluation time, cached vs recompute, by attention length (paper's Table 9)."""

    @dataclass(frozen=True)
    class Params:
        lengths: str = param("auto", help=LENGTHS_HELP, check=check_mems)
        tokens: int = param(128, help="tokens timed per length and evaluator", min=1, max=65536)
        repeats: int = param(3, help="timed calls per measurement (median)", min=1, max=100)

    default_n = 1
    quick_n = 1
    smoke: ClassVar[dict] = {
        "synth": {"lengths": "16,64", "tokens": 16, "repeats": 1},
        "bridged": {"lengths": "16,64", "tokens": 16, "repeats": 1},
    }
    columns = (
        Column("attn len", "attn_len", identifies=True),
        Column("cached ms/tok", "cached_ms_per_token", "f4"),
        Column("recompute ms/tok", "recompute_ms_per_token", "f4"),
        Column("ratio", "ratio", "times"),
    )

    def plan(self, ctx: RunContext) -> None:

        require_window([ctx.model], self.name)
        g = ctx.geometry
        if getattr(ctx.model.info, "evaluator", "cached") == "recompute":
            raise ProbeInputError(
                "speed compares the cached evaluator with recompute by itself; run it with "
                "--evaluator cached"
            )
        if g.mem_len == 0 and self.params.lengths == "auto":
            raise ProbeInputError(
                "speed: --mem 0 leaves nothing to compare; give --mem N (the largest memory) "
                "or --lengths"
            )
        self.mems = ctx.resolve_auto(
            "lengths",
            self.params.lengths,
            lambda t: parse_mems(t, g.mem_len),
            lambda: parse_mems("auto", g.mem_len),
            ints_text,
        )
        T = g.tgt_len
        self.warm = {m: math.ceil(m / T) * T for m in self.mems}
        length = max(self.warm.values()) + self.params.tokens + 1
        rng = ctx.rng(self.name, length)
        # the text's content does not change the time: local filler, in the model's tokens
        self.tokens = ctx.texts.local_text(rng, length).tokens.astype(np.int64)

    def _time(self, fn) -> list[float]:
        fn()  # warm-up
        out = []
        for _ in range(self.params.repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    def _measure(self, ctx: RunContext, n: int, mem: int, L: int) -> tuple[list, list]:
        """(cached, recompute) wall times of the repeats, for a row of n tokens."""

        K = self.params.tokens
        tok = self.tokens[None, :n]
        docs = np.zeros_like(tok)
        pos_all = np.ones(tok.shape, dtype=bool)
        pos_all[:, 0] = False
        pos_last = np.zeros(tok.shape, dtype=bool)
        pos_last[:, n - K :] = True
        gm = replace(ctx.geometry, mem_len=mem)
        cached = self._time(lambda: score_rows(ctx.model, tok, docs, pos_all, gm))
        recompute = self._time(lambda: score_truncated(ctx.model, tok, docs, pos_last, L, gm))
        return cached, recompute

    def execute(self, ctx: RunContext) -> Outcome:
        g = ctx.geometry
        K = self.params.tokens
        bins = []
        with ctx.steps(len(self.mems), f"{self.name}: lengths") as advance:
            for m in self.mems:
                n = self.warm[m] + K + 1
                L = m + g.tgt_len
                cached, recompute = self._measure(ctx, n, m, L)
                c_tok = [t / (n - 1) for t in cached]
                r_tok = [t / K for t in recompute]
                ratios = [r / c for r, c in zip(r_tok, c_tok, strict=True)]
                b: dict[str, Any] = {
                    "attn_len": L,
                    "mem_len": m,
                    "tgt_len": g.tgt_len,
                    "cached_ms_per_token": 1e3 * float(np.median(c_tok)),
                    "recompute_ms_per_token": 1e3 * float(np.median(r_tok)),
                    "ratio": float(np.median(r_tok) / np.median(c_tok)),
                    "ratio_range": [float(min(ratios)), float(max(ratios))],
                    "tokens_cached": n - 1,
                    "tokens_recompute": K,
                    "repeats": self.params.repeats,
                }
                bins.append(b)
                ctx.sample({**b, "cached_s": cached, "recompute_s": recompute})
                advance(1)
        metrics = {
            "lengths": [b["attn_len"] for b in bins],
            "ratio_at_max": bins[-1]["ratio"],
            "cached_ms_per_token_at_max": bins[-1]["cached_ms_per_token"],
            "recompute_ms_per_token_at_max": bins[-1]["recompute_ms_per_token"],
            "device": getattr(ctx.model.info, "device", None),
            "dtype": getattr(ctx.model.info, "dtype", None),
        }
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            verdict=(
                f"{self.name}: recompute is {bins[-1]['ratio']:.1f}× slower per token than the "
                f"cache at attention length {bins[-1]['attn_len']} ("
                + ", ".join(f"{b['ratio']:.1f}× at {b['attn_len']}" for b in bins)
                + ")"
            ),
            metric_docs=METRIC_DOCS,
            higher_is_better={"ratio": True, "cached_ms_per_token": False},
            n_pairs=0,
        )
        outcome.plots = [self._plot(ctx, bins)]
        return outcome

    def _plot(self, ctx, bins):

        xs = [b["attn_len"] for b in bins]
        series = {
            "cached (Transformer-XL memory)": {
                "x": xs,
                "y": [b["cached_ms_per_token"] for b in bins],
            },
            "recompute (fresh window per token)": {
                "x": xs,
                "y": [b["recompute_ms_per_token"] for b in bins],
                "style": "s--",
            },
        }
        title = (
            f"{self.name} · {ctx.model.info.id} · {ctx.model.info.device} "
            f"{ctx.model.info.dtype} · ratio at {xs[-1]}: {bins[-1]['ratio']:.1f}×"
        )

        return plots.deferred(
            line_plot,
            "speed.png",
            series,
            title=title,
            xlabel="attention length L = mem_len + tgt_len (tokens)",
            ylabel="ms per token (median)",
            logy=True,
        )


METRIC_DOCS = {
    "lengths": "attention lengths L = mem_len + tgt_len measured",
    "device": "where the model ran (cpu | cuda)",
    "dtype": "evaluation dtype",
    "ratio_at_max": "recompute / cached per-token time at the largest L",
    "cached_ms_per_token_at_max": "cached per-token time at the largest L (ms)",
    "recompute_ms_per_token_at_max": "recompute per-token time at the largest L (ms)",
    "bins[].cached_ms_per_token": "median over repeats of (time of the streamed row / tokens "
    "streamed), ms",
    "bins[].recompute_ms_per_token": "median over repeats of (time / tokens scored with a fresh "
    "window of L tokens each), ms",
    "bins[].ratio": "recompute_ms_per_token / cached_ms_per_token",
    "bins[].ratio_range": "smallest and largest per-repeat ratio",
}
