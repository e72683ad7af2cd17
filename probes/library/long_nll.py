"""long-nll: per-token loss over texts many caches long, by position — what a cache policy costs.

The measurement behind attention sinks (Xiao et al. 2023, StreamingLLM): a text several times
longer than the cache, scored token by token under one cache policy, its loss read by position.
Runs with the same `--seed`, `--length` and `--n` score the same texts, so policies compare text
by text: `--evaluator full` (every earlier token), `stream` (the KV cache cut to its last --mem
tokens: window attention), `sinks --sinks k` (the first k tokens kept besides: attention sinks),
`window` (a fresh window of mem + tgt tokens per scored token: sliding window with
recomputation), and a Transformer-XL model's `cached` / `recompute`.

Texts: `--length` tokens each, one document (`Texts.local_text`). On real text (`--haystack`) a
contiguous run of the haystack, its documents in order, as a book is read; on the synthetic
language, local-only sentences (nothing to retrieve: what a policy costs there is the loss of
nearby context, and the loss of the sinks). Every `--stride`-th position is scored (with a
recompute evaluator each scored token costs a window of its own: raise --stride there).

Per text (the unit of analysis) and position band: the mean NLL of its scored tokens. Bands are
W = mem + tgt positions wide: [1, W), [W, 2W), …; a band's NLL is the mean over texts with a
95 % Student-t interval, and its perplexity exp(NLL). `after_fill`: targets from F on, the first
one whose segment (of tgt_len queries) starts past mem, F = (⌊mem / tgt⌋ + 1)·tgt + 1: there a
cut cache has dropped the text's start and the policies part; `before`: targets below F, which
see the whole text so far under every policy of the same chunking.

What changes with chunking: a streaming evaluator scores `tgt_len` tokens per step, so a query
at offset o of its segment sees mem + o + 1 keys (StreamingLLM fed one token per step: a cache of
exactly W). `--tgt-len 1` is the paper's protocol, at tgt_len times the steps.

Default n = 4 texts (each thousands of scored tokens: a text's band mean has an sd of a few
hundredths of a nat, while a policy that loses its sinks moves it by nats).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import Column
from probes.api.model import score_rows
from probes.api.params import param
from probes.api.probe_base import Outcome, Probe, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.api.rows import Rows, score_batches
from probes.report import plots
from probes.report.plots import line_plot

BANDS_MAX = 16  # bands shown; later positions fall in the last one
ROOM = 8  # haystack tokens a text leaves unused (runs are cut at piece boundaries)


@probe("long-nll", version=2)
class LongNLL(Probe):
    """Per-token loss by position over texts many caches long, under the run's cache policy."""

    @dataclass(frozen=True)
    class Params:
        length: int = param(
            0,
            help="tokens per text (0: 4 × (mem + tgt), within the model's positions and the "
            "haystack)",
            min=0,
            max=1_000_000,
        )
        stride: int = param(1, help="score every k-th position", min=1, max=100_000)

    default_n = 4
    quick_n = 2
    shards = True  # scores through score_batches only
    needs_language = True
    smoke: ClassVar[dict] = {"synth": {"length": 200}, "haystack": {"length": 200}}
    margin = 0.05
    margin_unit = "nats/token"
    margin_why = "a 5 % change of a token's perplexity; dropping the sinks moves it by nats"
    columns = (
        Column("positions", "positions", identifies=True),
        Column("n", "n"),
        Column("scored/text", "scored_per_text", "g"),
        Column("NLL", "nll", "f3"),
        Column("95% CI", "ci95", "ci"),
        Column("PPL", "ppl", "f2"),
    )

    def plan(self, ctx: RunContext) -> None:
        g = ctx.geometry
        self.band = g.mem_len + g.tgt_len
        if self.band < 2:
            raise ProbeInputError(
                f"{self.name}: mem + tgt = {self.band} leaves no band; raise --mem"
            )
        self.fill = (g.mem_len // g.tgt_len + 1) * g.tgt_len + 1  # the first target cut off
        length = self.params.length or 4 * self.band
        limits = [(n if of_model else n - ROOM, what) for n, what, of_model in ctx.length_limits()]
        cut_by = ""  # what shortened the default length
        for top, what in limits:
            if length > top:
                if self.params.length:
                    raise ProbeInputError(
                        f"--length {length:,}: {what} hold texts up to {top:,} tokens; give a "
                        "shorter --length"
                    )
                length, cut_by = top, what
        if length < 2 * self.params.stride + 1:
            raise ProbeInputError(
                f"{self.name}: texts of {length} tokens leave nothing to score at --stride "
                f"{self.params.stride}; give a longer --length or a smaller --stride"
            )
        if length <= self.fill + self.params.stride:
            cut = f" (all that {cut_by} hold)" if cut_by else ""
            raise ProbeInputError(
                f"{self.name}: texts of {length:,} tokens{cut} end before the cache first cuts "
                f"the text (target {self.fill:,} at mem {g.mem_len}, tgt {g.tgt_len}): nothing "
                "to compare after it; give a longer --length or a smaller --mem"
            )
        self.length = length
        rng = ctx.rng(self.name, length)
        self.texts = [ctx.texts.local_text(rng, length) for _ in range(ctx.n)]
        self.scored = np.arange(self.params.stride, length, self.params.stride)
        self.bands = self._bands(length)

    def _bands(self, length: int) -> list[tuple[int, int]]:
        """[lo, hi) position bands of width W, the last one open to the text's end."""
        edges = [*[1, *range(self.band, length, self.band)][:BANDS_MAX], length]
        return [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]

    def execute(self, ctx: RunContext) -> Outcome:

        records, curves = score_batches(
            ctx,
            list(range(len(self.texts))),
            1,
            f"{self.name}: scoring texts",
            lambda items: self._score(ctx, items),
        )
        return self.summarize(ctx, records, curves)

    def _score(self, ctx: RunContext, items):

        rows = Rows()
        for i in items:
            rows.add(self.texts[i].tokens, self.texts[i].doc_ids, self.scored)
        tokens, docs, pos, _, _ = rows.arrays(ctx.pad_id)
        nll = score_rows(ctx.model, tokens, docs, pos, ctx.geometry).nll
        out = []
        for j, i in enumerate(items):
            curve = nll[j, self.scored]
            if not np.all(np.isfinite(curve)):
                raise RuntimeError(f"{self.name}: the model returned a non-finite NLL")
            rec: dict[str, Any] = {"text": i, "length": self.length}
            rec["nll_before"] = _mean(curve[self.scored < self.fill])
            rec["nll_after_fill"] = _mean(curve[self.scored >= self.fill])
            rec["bands"] = [_mean(curve[(self.scored >= lo) & (self.scored < hi)])
                            for lo, hi in self.bands]  # fmt: skip
            out.append((rec, curve))
        return out

    def summarize(self, ctx: RunContext, records: list[dict], curves: list) -> Outcome:
        bins = []
        for k, (lo, hi) in enumerate(self.bands):
            values = np.array([r["bands"][k] for r in records], dtype=float)
            d = stats.describe(values[np.isfinite(values)])
            inside = int(((self.scored >= lo) & (self.scored < hi)).sum())
            bins.append(
                {
                    "positions": f"{lo:,}–{hi - 1:,}",
                    "band_lo": lo,
                    "band_hi": hi - 1,
                    "n": d["n"],
                    "scored_per_text": inside,
                    "nll": d["mean"],
                    "ci95": d["ci95"],
                    "ppl": _ppl(d["mean"]),
                }
            )
        metrics: dict[str, Any] = {
            "band_width": self.band,
            "fill_from": self.fill,
            "length": self.length,
        }
        for part in ("before", "after_fill"):
            d = stats.describe(np.array([r[f"nll_{part}"] for r in records], dtype=float))
            metrics[f"nll_{part}"] = {"mean": d["mean"], "ci95": d["ci95"], "n": d["n"]}
            metrics[f"ppl_{part}"] = _ppl(d["mean"])
        g = ctx.geometry
        metrics["policy"] = {
            "evaluator": ctx.model.info.evaluator,
            "mem_len": g.mem_len,
            "tgt_len": g.tgt_len,
            "sinks": ctx.model.info.extra.get("sinks"),
            "cached_positions": ctx.model.info.extra.get("cached_positions"),
            "dtype": ctx.model.info.dtype,
        }
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            metric_docs=METRIC_DOCS,
            higher_is_better={"nll": False, "nll_after_fill": False, "nll_before": False},
            n_pairs=len(records),
            arrays={
                "text": np.repeat(np.arange(len(curves), dtype=np.int64), len(self.scored)),
                "position": np.tile(self.scored.astype(np.int64), len(curves)),
                "nll": np.concatenate(curves) if curves else np.zeros(0),
            },
            texts={
                "tokens": np.stack([t.tokens for t in self.texts]).astype(np.int32),
                "doc_ids": np.stack([t.doc_ids for t in self.texts]).astype(np.int32),
            },
        )
        after, before = metrics["nll_after_fill"], metrics["nll_before"]
        sinks = metrics["policy"]["sinks"]
        outcome.verdict = (
            f"{self.name}: NLL {_num(after['mean'])} (PPL {_num(metrics['ppl_after_fill'], 2)}) "
            f"after the cache fills (targets ≥ {self.fill:,}), {_num(before['mean'])} before, "
            f"over {len(records)} texts of {self.length:,} tokens — {ctx.model.info.evaluator}, "
            f"mem {g.mem_len}, tgt {g.tgt_len}" + (f", {sinks} sinks" if sinks is not None else "")
        )
        outcome.plots = [self._plot(ctx, curves)]
        return outcome

    def _plot(self, ctx, curves):

        width = max(1, math.ceil(len(self.scored) / 128))  # about 128 points per curve
        mean = np.mean(np.stack(curves), axis=0) if curves else np.zeros(len(self.scored))
        xs = [int(self.scored[a]) for a in range(0, len(self.scored), width)]
        ys = [float(mean[a : a + width].mean()) for a in range(0, len(self.scored), width)]
        g = ctx.geometry
        series = {f"{ctx.model.info.evaluator}: mean over texts, {width} scored tokens per point": {
            "x": xs, "y": ys, "style": "-"}}  # fmt: skip
        return plots.deferred(
            line_plot,
            "nll_by_position.png",
            series,
            title=f"{self.name} · {ctx.model.info.id} · mem {g.mem_len} tgt {g.tgt_len}",
            xlabel="position in the text (tokens)",
            ylabel="NLL (nats/token)",
            vlines=[(self.band, "mem + tgt")],
        )


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def _ppl(nll: float | None) -> float | None:
    return None if nll is None or not math.isfinite(nll) else float(math.exp(nll))


def _num(x, digits: int = 3) -> str:
    if isinstance(x, dict):
        x = x.get("mean")
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


METRIC_DOCS = {
    "nll_after_fill": "mean over texts of each text's mean NLL at targets ≥ fill_from (after a "
    "cut cache has dropped the text's start), with its 95% t interval",
    "nll_before": "the same at targets < fill_from",
    "fill_from": "(⌊mem / tgt⌋ + 1)·tgt + 1: the first target whose segment starts past mem",
    "ppl_after_fill": "exp(nll_after_fill.mean): the perplexity StreamingLLM reports",
    "ppl_before": "exp(nll_before.mean)",
    "band_width": "mem + tgt: the width of a position band",
    "length": "tokens per text",
    "policy": "the evaluator, mem_len, tgt_len and sinks the texts were scored under",
    "bins[].nll": "mean over texts of the band's mean NLL, with its 95% t interval (ci95)",
    "bins[].ppl": "exp(bins[].nll)",
}
